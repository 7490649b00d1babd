/* An application outside the tree, built against the installed library. */
#include <rowlock.h>
#include <stdio.h>

int main(void)
{
    rowlock_client *c = NULL;
    if (rowlock_client_new(&c) != 0)
        return 1;
    printf("rowlock %s (header %s), owner %s, %s\n", rowlock_version(), ROWLOCK_VERSION_STRING,
           rowlock_client_owner(c), rowlock_error_name(ROWLOCK_EBUSY));
    rowlock_client_free(c);
    return 0;
}
