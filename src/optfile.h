/*
 * optfile.c: reading MySQL option files ([client], [client-server],
 * [client-mariadb], [rowlock]) once per connect, and rendering what they
 * said for Connector/C. Called by client.c (at connect) and db_connect.c
 * (handing the options over); the CLI's raw connections use it too.
 */
#ifndef ROWLOCK_OPTFILE_H
#define ROWLOCK_OPTFILE_H

#include <stddef.h>

/* Find `key` in `group` of MySQL option files: only `defaults_file` if not
 * NULL, else the standard files when read_default_files. The last occurrence
 * wins, as in MySQL. Returns 1 found, 0 not found, -1 unreadable
 * defaults_file (errno set). */
int rowlock__optfile_get(const char *defaults_file, int read_default_files, const char *group,
                         const char *key, char *out, size_t outcap);

/* Everything read from option files for one connect: each key of the
 * groups asked for, in file order (key with '_' written '-'; a flag has
 * has_val 0 and val ""). */
typedef struct rowlock__optent {
    char *key;
    char *val;
    int has_val;
    int group; /* index into the groups given to rowlock__opts_load */
} rowlock__optent;
typedef struct rowlock__opts {
    rowlock__optent *v;
    size_t n, cap;
    char err[400]; /* why loading failed (user input escaped) */
} rowlock__opts;
/* Read `defaults_file` (or, when NULL and read_default_files, the standard
 * files) once. Returns 0, or -1 with o->err and errno set (then o is empty).
 * Non-regular files other than pipes, files over 1 MiB and lookups over
 * 8 MiB are refused, included files too. */
int rowlock__opts_load(rowlock__opts *o, const char *defaults_file, int read_default_files,
                       const char *const *groups);
/* The last entry of `key` in group index `group` (-1: any group), or NULL. */
const rowlock__optent *rowlock__opts_find(const rowlock__opts *o, int group, const char *key);
/* The entries as one "[client]" option file for Connector/C, without those
 * for which drop(key) is true (keys are given with '-'). NULL on error
 * (message in err). The result may hold a password: zero it before free. */
char *rowlock__opts_render(const rowlock__opts *o, int (*drop)(const char *key, void *arg), void *arg,
                           size_t *len, char *err, size_t errcap);
void rowlock__opts_free(rowlock__opts *o);

#endif /* ROWLOCK_OPTFILE_H */
