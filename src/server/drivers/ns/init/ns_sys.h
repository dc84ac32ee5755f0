/*
** Namespace primitives that need libc alone (ns_sys.c): shared by the
** server and mastra-ns-init.
*/
#ifndef MP_NS_SYS_H
#define MP_NS_SYS_H

#include <stddef.h>

/* Write text to the file name in directory dir (AT_FDCWD: path), a /proc
** or cgroup file: 0, or -1 with errno. */
int mp_ns_write_at(int dir, const char *name, const char *text);
int mp_ns_write_text(const char *path, const char *text);

/* The uid and gid maps of the process whose /proc directory is procdir:
** ids 0..count-1 are host ids base... 0, or -1 with errno. */
int mp_ns_write_maps(int procdir, unsigned base, unsigned count);

/* A user namespace with the uid and gid map `map` (the text of a uid_map
** file, "INSIDE OUTSIDE COUNT" lines), made by a child that is gone when
** this returns (the descriptor keeps the namespace): its descriptor, or
** -1 with errno. For the id map of an idmapped mount (ns_idmap.c). */
int mp_ns_userns_of(const char *map);

/* In a process that just unshared CLONE_NEWUSER: map root in it to the
** process's host uid and gid (outer ids, read before the unshare), one id
** each, with setgroups denied. 0, or -1 with errno. */
int mp_ns_map_self(unsigned uid, unsigned gid);

/* Close every descriptor of the process (close_range). */
void mp_ns_close_all(void);

/* Mount src on dst with the id map of the user namespace userns_fd (in
** this process's mount namespace). 0, or -1 with errno. */
int mp_ns_idmap_mount(int userns_fd, const char *src, const char *dst);

/* 1 if fd is a user namespace */
int mp_ns_is_userns(int fd);

/* Descriptors over a unix socket (SCM_RIGHTS, MP_NS_FDS_MAX at most):
** send: len bytes of msg with fds[0..n-1]; 0, or -1 with errno. recv: up
** to len bytes into msg (flags as recvmsg's; MSG_CMSG_CLOEXEC added), the
** descriptors that came with them into fds (n at most; more are closed),
** *nfds how many; the byte count, or -1 with errno. */
#define MP_NS_FDS_MAX 8
int mp_ns_send_fds(int sock, const void *msg, size_t len, const int *fds, int n);
long mp_ns_recv_fds(int sock, void *msg, size_t len, int flags, int *fds, int n,
                    int *nfds);

/* The command's environment from what the server sent (ns_init.h,
** MP_NS_ENV_PREFIX): in env (NULL-terminated, changed in place), the
** entries with the prefix lose it and every other one is dropped. */
char **mp_ns_env_unwrap(char **env);

/* The name of errno value e ("EPERM", "ENOTDIR"; "errno 1234" for one
** this table lacks), for the "<step>: <ERRNO NAME>" of every failure of
** mastra-ns-init (ns_init.h) */
const char *mp_ns_errno_name(int e);

/* The syscall filter of every sandbox process (ns_init.h, MP_NS_FILTER):
** load reads the classic BPF program that the server wrote to path (as
** host root, before the setns into the sandbox's mount namespace hides it);
** install sets no_new_privs and the filter on the calling thread, in the
** sandbox, right before the exec of its program. 0, or -1 with errno. */
int mp_ns_filter_load(const char *path);
int mp_ns_filter_install(void);

#endif
