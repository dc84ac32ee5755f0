/*
** The harness of the C tests: CHECK(cond) counts passes and failures and
** reports a failure with its file and line; each test's main prints
** "N passed, N failed" (the closing line CI reads) and exits 1 on a
** failure. Include it once per test program.
*/
#ifndef MASTRA_TEST_CHECK_H
#define MASTRA_TEST_CHECK_H

#include <dirent.h>
#include <stdio.h>

static int g_pass, g_fail;

static int check_(int ok, const char *expr, const char *file, int line) {
  if (ok) {
    g_pass++;
  } else {
    g_fail++;
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", file, line, expr);
  }
  return ok;
}

#define CHECK(cond) check_((cond) != 0, #cond, __FILE__, __LINE__)

/* Open descriptors of this process, to catch leaks; -1 if unknown. */
static inline int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  int n = 0;
  if (d == NULL) return -1;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* the descriptor of the listing itself */
}

#endif
