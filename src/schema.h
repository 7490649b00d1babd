/*
 * schema.c: the migrations (sql/, embedded at build time), rowlock_migrate
 * and the schema-version check a connect makes. Called by client.c.
 */
#ifndef ROWLOCK_SCHEMA_H
#define ROWLOCK_SCHEMA_H

#include "rowlock.h"

typedef struct rowlock__migration {
    int number;
    const char *file;
    const char *sql;
} rowlock__migration;
extern const rowlock__migration rowlock__migrations[];
extern const int rowlock__migration_count;  /* files embedded */
extern const int rowlock__migration_latest; /* the highest number: the expected version */
int rowlock__schema_check(rowlock_client *c);

#endif /* ROWLOCK_SCHEMA_H */
