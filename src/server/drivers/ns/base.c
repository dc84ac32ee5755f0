/*
** The base of the `namespaces` driver (base.h): a directory tree built once
** per data directory (DATA/base) or given with --base, by a shell script
** run by /bin/sh in a child while the server waits (before it serves).
**
** It is a skeleton, built in a moment without root, on any file system:
** Debian 12 is merged-usr, so /bin, /lib, /lib64 and /sbin are the host's
** symlinks into /usr; a curated /etc (no shadow, gshadow, sudoers, ssh
** host keys, private TLS keys or machine id); empty /tmp, /proc, /dev,
** /sys, /root, /home, /run, /var, /workspace; TypeScript and tsx installed
** by npm under /opt/mastra-npm, linked from usr/local/bin. Its usr
** directory is a small layer (those links) and the marker
** MP_BASE_HOST_USR: a sandbox's /usr is an overlay of it over the host's
** /usr (ns_init.c). No file of /usr is copied or hard-linked (a non-root
** user may not hard-link root's files: fs.protected_hardlinks).
*/
#define _GNU_SOURCE
#include "drivers/ns/base.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define STAMP ".mastra-base"

static const char script[] =
    "set -u\n"
    "dst=$1; minimal=$2; tmp=$dst.tmp-$$\n"
    "fail() { echo \"$1\" >&2; rm -rf \"$tmp\"; exit 1; }\n"
    "rm -rf \"$dst\".tmp-* && mkdir -p \"$tmp\" || fail \"cannot create $tmp\"\n"
    "mkdir -p \"$tmp/usr/local/bin\" && : > \"$tmp/" MP_BASE_HOST_USR "\" ||"
    " fail \"cannot write $tmp\"\n"
    "for l in bin lib lib32 lib64 libx32 sbin; do\n"
    "  if [ -L /$l ]; then ln -s \"$(readlink /$l)\" \"$tmp/$l\";\n"
    "  elif [ -d /$l ]; then cp -a /$l \"$tmp/$l\" || fail \"cannot copy /$l\"; fi\n"
    "done\n"
    "mkdir -p \"$tmp/etc\" && tar -C /etc --exclude=./shadow --exclude=./shadow-"
    " --exclude=./gshadow --exclude=./gshadow- --exclude=./sudoers"
    " --exclude=./sudoers.d --exclude='./ssh/ssh_host_*'"
    " --exclude=./ssl/private --exclude=./machine-id --exclude=./subuid"
    " --exclude=./subgid --exclude='./*.key' -cf - . 2>/dev/null"
    " | tar -C \"$tmp/etc\" -xf - || fail 'cannot copy /etc'\n"
    "printf '127.0.0.1 localhost\\n::1 localhost\\n' > \"$tmp/etc/hosts\"\n"
    ": > \"$tmp/etc/resolv.conf\"\n"
    "for d in tmp var/tmp; do mkdir -p \"$tmp/$d\" && chmod 1777 \"$tmp/$d\";"
    " done\n"
    "for d in proc dev sys home run workspace var/lib var/cache var/log opt;"
    " do mkdir -p \"$tmp/$d\"; done\n"
    "mkdir -m 700 \"$tmp/root\"\n"
    "note='typescript and tsx: not installed (minimal base)'\n"
    "if [ \"$minimal\" = 0 ]; then\n"
    "  if timeout 120 npm install -g --no-fund --no-audit --fetch-retries=1"
    " --fetch-timeout=30000 --loglevel=error --update-notifier=false --prefix"
    " \"$tmp/opt/mastra-npm\" typescript tsx </dev/null >&2; then\n"
    "    for b in \"$tmp\"/opt/mastra-npm/bin/*; do b=${b##*/}; ln -sfn"
    " /opt/mastra-npm/bin/$b \"$tmp/usr/local/bin/$b\"; done\n"
    "    note='typescript and tsx: installed from the npm registry'\n"
    "  else\n"
    "    rm -rf \"$tmp/opt/mastra-npm\"\n"
    "    note='typescript and tsx: NOT installed (the npm registry could not"
    " be reached)'\n"
    "  fi\n"
    "fi\n"
    "echo \"$note\" >&2\n"
    "echo \"$note\" > \"$tmp/" STAMP "\"\n"
    "rm -rf \"$dst.old\"\n"
    "if [ -e \"$dst\" ]; then mv \"$dst\" \"$dst.old\" || fail \"cannot move $dst\"; fi\n"
    "mv \"$tmp\" \"$dst\" || fail \"cannot move $tmp\"\n"
    "rm -rf \"$dst.old\"\n";

int mp_base_ready(const char *dir) {
  char path[4200];
  struct stat st;
  snprintf(path, sizeof path, "%s/" STAMP, dir);
  return stat(path, &st) == 0;
}

int mp_base_build(const char *dir, int minimal, char *err, size_t errlen) {
  char *argv[7];
  pid_t pid;
  int rc, status;
  argv[0] = "sh";
  argv[1] = "-c";
  argv[2] = (char *)script;
  argv[3] = "mastra-base";
  argv[4] = (char *)dir;
  argv[5] = minimal ? "1" : "0";
  argv[6] = NULL;
  /* stdout is the server's JSON line: the script's output goes to stderr */
  {
    posix_spawn_file_actions_t fa;
    extern char **environ;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, 2, 1);
    rc = posix_spawn(&pid, "/bin/sh", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
  }
  if (rc != 0) {
    snprintf(err, errlen, "cannot start /bin/sh: %s", strerror(rc));
    return -1;
  }
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      snprintf(err, errlen, "waitpid: %s", strerror(errno));
      return -1;
    }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    snprintf(err, errlen, "building the base in %s failed (see above)", dir);
    return -1;
  }
  return 0;
}

static void base_path(const char *data_dir, const char *base, char *out,
                      size_t n) {
  if (base != NULL)
    snprintf(out, n, "%s", base);
  else
    snprintf(out, n, "%s/base", data_dir);
}

int mp_base_command(int argc, char **argv) {
  const char *data_dir = NULL, *base = NULL;
  char dir[4096], err[1024];
  int i, minimal = 0;
  if (argc < 3 || strcmp(argv[2], "build") != 0) goto usage;
  for (i = 3; i < argc; i++) {
    if (strcmp(argv[i], "--minimal") == 0) minimal = 1;
    else if (strcmp(argv[i], "--data-dir") == 0 && i + 1 < argc)
      data_dir = argv[++i];
    else if (strcmp(argv[i], "--base") == 0 && i + 1 < argc)
      base = argv[++i];
    else goto usage;
  }
  if (base == NULL && data_dir == NULL) {
    fprintf(stderr, "mastra-platform base build: give --data-dir DIR (the"
            " base goes to DIR/base) or --base DIR\n");
    return 2;
  }
  base_path(data_dir, base, dir, sizeof dir);
  if (mp_base_build(dir, minimal, err, sizeof err) < 0) {
    fprintf(stderr, "mastra-platform base build: %s\n", err);
    return 1;
  }
  printf("%s\n", dir);
  return 0;
usage:
  fprintf(stderr, "usage: mastra-platform base build [--data-dir DIR |"
          " --base DIR] [--minimal]\n");
  return 2;
}
