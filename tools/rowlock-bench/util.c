/*
 * rowlock-bench: clocks, sample vectors, percentiles, and the watchdog that bounds every phase.
 */
#include "bench.h"

/* ---- small utilities ------------------------------------------------------ */

int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void sleep_ns(int64_t ns)
{
    struct timespec ts;
    if (ns <= 0)
        return;
    ts.tv_sec = (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int64_t thread_cpu_ns(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        return 0;
    return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000 +
           ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

uint32_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return (uint32_t)(x >> 32);
}

void setf(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
}

void vec_push(vec *a, int64_t x)
{
    if (a->n == a->cap) {
        size_t ncap = a->cap ? a->cap * 2 : 4096;
        int64_t *nv;
        if (ncap > SAMPLES_MAX || (nv = realloc(a->v, ncap * sizeof *nv)) == NULL) {
            a->dropped++;
            return;
        }
        a->v = nv;
        a->cap = ncap;
    }
    a->v[a->n++] = x;
}

void vec_free(vec *a)
{
    free(a->v);
    memset(a, 0, sizeof *a);
}

int cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

/* Nearest-rank percentile of n samples (sorted in place), in microseconds. */
double pct_us(int64_t *v, size_t n, double p)
{
    size_t k;
    if (n == 0)
        return NAN;
    k = (size_t)ceil(p / 100.0 * (double)n);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return (double)v[k - 1] / 1000.0;
}

/* ---- the watchdog: every phase has a time limit ---------------------------- */

static int64_t wd_deadline;       /* ns, 0: none */
static const char *wd_phase = ""; /* static strings only */
int wd_quit;
volatile sig_atomic_t g_interrupted;

void wd_arm(const char *phase, double seconds)
{
    A_STORE(&wd_phase, phase);
    A_STORE(&wd_deadline, now_ns() + (int64_t)(seconds * 1e9));
}

void wd_disarm(void)
{
    A_STORE(&wd_deadline, (int64_t)0);
}

void *wd_main(void *arg)
{
    (void)arg;
    while (!A_LOAD(&wd_quit)) {
        int64_t d = A_LOAD(&wd_deadline);
        if (d != 0 && now_ns() > d) {
            fprintf(stderr, "%s: %s did not finish within its time limit; aborting\n", PROG,
                    A_LOAD(&wd_phase));
            fflush(NULL);
            _exit(1);
        }
        sleep_ns(100000000);
    }
    return NULL;
}

void on_signal(int sig)
{
    (void)sig;
    g_interrupted = 1;
}
