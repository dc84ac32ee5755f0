/*
** The cgroups of the `namespaces` driver (ns_cgroup.c): per sandbox, a pids
** limit, a memory limit and one cpu share, under the data directory's
** cgroup; the sweeps at start (this data directory's leftovers, and those
** of a deleted data directory whose server is gone).
*/
#ifndef MP_NS_CGROUP_H
#define MP_NS_CGROUP_H

#include <stddef.h>

/* hierarchies at most (v1: pids, memory, cpu) */
#define MP_NSCG_MAX 3

/* At startup: find the cgroups (unpriv: under the server's own, where
** they are delegated to it), claim this data directory's, sweep; limits
** gets what getInfo() reports ("cgroup v1", "none: ...") and the log says
** when there are none. */
void mp_nscg_setup(const char *data_dir, long long pids_max,
                   long long memory_max, double cpu_max, int unpriv,
                   char *limits, size_t limits_len);
/* the hierarchies in use (0: no cgroups) */
int mp_nscg_count(void);
/* the file of sandbox id in hierarchy i that a single-threaded process
** writes "0" to in order to join it (v1 `tasks`, v2 cgroup.procs) */
void mp_nscg_join_file(const char *id, int i, char *out, size_t n);
/* make sandbox id's cgroups and write its limits (cpus, memory_bytes: its
** template's; 0: the server's --sandbox-cpu-max, --sandbox-memory-max):
** 0, or -1 and err */
int mp_nscg_make(const char *id, double cpus, long long memory_bytes,
                 char *err, size_t errlen);
/* rename sandbox from's cgroups to sandbox to's (a warm sandbox taken by
** a create): 0, or -1 and errno with from's names kept */
int mp_nscg_rename(const char *from, const char *to);
/* fn(pid, data) for each process in sandbox id's cgroups (host pids);
** -1 without cgroups */
int mp_nscg_each(const char *id, void (*fn)(long pid, void *data),
                 void *data);
/* SIGKILL what they hold and remove them: 0 once all are gone */
int mp_nscg_remove(const char *id);
/* At exit: remove this data directory's cgroup (and its marker) */
void mp_nscg_finish(void);

#endif
