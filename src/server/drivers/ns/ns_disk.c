/*
** A sandbox's own disk (ns_disk.h; docs/platform.md, "Disk and inode
** quota"). This kernel has no quota formats (no CONFIG_QFMT_V2, no XFS
** quota), so ext4 and xfs project quotas cannot be used; a file system of
** its own per sandbox bounds both its bytes and its inodes instead.
**
** At start (before the server serves) one empty image of the flags' size
** and inode count is made with mkfs.ext4 (no journal, no resize inode, no
** reserved blocks, lazy inode tables: a few MB on disk however large), at
** DATA/disks/empty-<bytes>-<inodes>.img, kept for the next start. A
** sandbox's image is a sparse copy of it (FICLONE where the data disk
** can, else its data extents found with SEEK_DATA/SEEK_HOLE and copied
** with copy_file_range), attached to a free loop device (LOOP_CONFIGURE,
** LO_FLAGS_AUTOCLEAR: the device goes when the file system's last user
** does) and mounted nosuid,nodev at the sandbox's ROOT. With
** --sandbox-disk-reserve on (the default) the copy is then allocated whole
** (fallocate: about 20 ms for 10G on ext4 here), so that the data disk
** cannot run out under a sandbox that is within its limit: a sparse image
** on a full data disk takes writes it then loses (docs/platform.md). Off,
** it stays sparse and is mounted with discard (freed blocks are punched
** out of the image again). All of it is direct syscalls on the loop
** thread, each short and bounded: no child at a create.
*/
#define _GNU_SOURCE
#include "drivers/ns/ns_disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "util/index.h"
#include "util/log.h"
#include "util.h"

extern char **environ;

/* mkfs's options: the image's file system (docs/platform.md) */
#define MKFS_FEATURES "^has_journal,^resize_inode"
#define MKFS_EXTENDED "lazy_itable_init=1,lazy_journal_init=1,nodiscard"
/* no zeroing of the inode tables in the background: the copy's are holes
** (or allocated unwritten, which reads as zeros) */
#define MOUNT_DATA "noinit_itable"
#define MOUNT_DATA_SPARSE "discard,noinit_itable"
/* a loop device taken by another between LOOP_CTL_GET_FREE and ours */
#define LOOP_TRIES 8

static struct {
  long long bytes, inodes;
  int reserve;                 /* images allocated whole (ns_disk.h) */
  char empty[4300];            /* the empty image, "" when off */
} disk;

int mp_ns_disk_on(void) { return disk.empty[0] != '\0'; }

void mp_ns_disk_health(cJSON *o) {
  cJSON *d;
  if (!mp_ns_disk_on()) {
    cJSON_AddNullToObject(o, "sandboxDisk");
    return;
  }
  d = cJSON_AddObjectToObject(o, "sandboxDisk");
  if (d == NULL) return;
  cJSON_AddNumberToObject(d, "maxBytes", (double)disk.bytes);
  cJSON_AddNumberToObject(d, "inodes", (double)disk.inodes);
  cJSON_AddBoolToObject(d, "reserve", disk.reserve);
}

/* path is this start's empty image */
static int is_empty_image(const char *path) {
  return disk.empty[0] != '\0' && strcmp(path, disk.empty) == 0;
}

void mp_ns_disk_path(const char *data_dir, const char *id, char *out,
                     size_t n) {
  snprintf(out, n, "%s/disks/%s.img", data_dir, id);
}

/* the first of mkfs.ext4's usual places (the server's PATH may lack sbin) */
static const char *find_mkfs(void) {
  static const char *const dirs[] = {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4",
                                     "/usr/bin/mkfs.ext4", "/bin/mkfs.ext4"};
  size_t i;
  for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    if (access(dirs[i], X_OK) == 0) return dirs[i];
  return NULL;
}

/* mkfs.ext4 on the file at path (its size made first): 0, or -1 and err
** with mkfs's own words */
static int run_mkfs(const char *path, long long bytes, long long inodes,
                    char *err, size_t errlen) {
  const char *mkfs = find_mkfs();
  char sinodes[32], out[1024];
  char *argv[20];
  posix_spawn_file_actions_t fa;
  int fd, pipefd[2], rc, status, n = 0;
  size_t got = 0;
  pid_t pid;
  if (mkfs == NULL) {
    snprintf(err, errlen, "--sandbox-disk-max needs mkfs.ext4 (e2fsprogs),"
             " which is not installed");
    return -1;
  }
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0) {
    snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  close(fd);
  argv[n++] = "mkfs.ext4";
  argv[n++] = "-q";
  argv[n++] = "-F";
  argv[n++] = "-m";
  argv[n++] = "0";
  argv[n++] = "-b";
  argv[n++] = "4096";
  if (inodes > 0) {
    snprintf(sinodes, sizeof sinodes, "%lld", inodes);
    argv[n++] = "-N";
    argv[n++] = sinodes;
  }
  argv[n++] = "-O";
  argv[n++] = MKFS_FEATURES;
  argv[n++] = "-E";
  argv[n++] = MKFS_EXTENDED;
  argv[n++] = "-L";
  argv[n++] = "mastra-sandbox";
  argv[n++] = (char *)path;
  argv[n] = NULL;
  if (pipe2(pipefd, O_CLOEXEC) < 0) {
    snprintf(err, errlen, "pipe: %s", strerror(errno));
    return -1;
  }
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
  posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
  rc = posix_spawn(&pid, mkfs, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(pipefd[1]);
  if (rc != 0) {
    close(pipefd[0]);
    snprintf(err, errlen, "cannot run %s: %s", mkfs, strerror(rc));
    return -1;
  }
  /* a few lines at most; read to its end, then reap it */
  for (;;) {
    ssize_t r = read(pipefd[0], out + got, sizeof out - 1 - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
    if (got == sizeof out - 1) {
      char sink[512];
      while (read(pipefd[0], sink, sizeof sink) > 0)
        ;
      break;
    }
  }
  out[got] = '\0';
  close(pipefd[0]);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    out[strcspn(out, "\n")] = '\0';
    snprintf(err, errlen, "mkfs.ext4 of a %lld-byte image%s%s failed: %s",
             bytes, inodes > 0 ? " with -N " : "", inodes > 0 ? sinodes : "",
             out[0] ? out : "(no message)");
    return -1;
  }
  return 0;
}

int mp_ns_disk_setup(const char *data_dir, long long bytes, long long inodes,
                     int reserve, int unpriv, char *err, size_t errlen) {
  char dir[4200], tmp[4400];
  disk.empty[0] = '\0';
  if (bytes == 0 && reserve >= 0) {
    snprintf(err, errlen, "--sandbox-disk-reserve needs --sandbox-disk-max:"
             " it is how each sandbox's own disk is allocated");
    return -1;
  }
  disk.reserve = reserve != 0;
  if (bytes == 0 && inodes == 0) return 0;
  if (bytes == 0) {
    snprintf(err, errlen, "--sandbox-inodes-max needs --sandbox-disk-max:"
             " the inodes are those of the sandbox's own disk");
    return -1;
  }
  if (unpriv) {
    snprintf(err, errlen, "--sandbox-disk-max and --sandbox-inodes-max need"
             " root: each sandbox's disk is a loop device and a mount (the"
             " server runs as uid %d)", (int)geteuid());
    return -1;
  }
  if (access("/dev/loop-control", R_OK | W_OK) < 0) {
    snprintf(err, errlen, "--sandbox-disk-max needs loop devices:"
             " /dev/loop-control: %s", strerror(errno));
    return -1;
  }
  disk.bytes = bytes;
  disk.inodes = inodes;
  snprintf(dir, sizeof dir, "%s/disks", data_dir);
  if (mastra__mkdirs(dir, 0700, NULL) < 0) {
    snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
    return -1;
  }
  snprintf(disk.empty, sizeof disk.empty, "%s/empty-%lld-%lld.img", dir, bytes,
           inodes);
  if (access(disk.empty, F_OK) == 0) return 0;
  snprintf(tmp, sizeof tmp, "%s/.empty-%d.tmp", dir, (int)getpid());
  if (run_mkfs(tmp, bytes, inodes, err, errlen) < 0) {
    unlink(tmp);
    disk.empty[0] = '\0';
    return -1;
  }
  if (rename(tmp, disk.empty) < 0) {
    snprintf(err, errlen, "cannot rename %s: %s", tmp, strerror(errno));
    unlink(tmp);
    disk.empty[0] = '\0';
    return -1;
  }
  return 0;
}

/* {====== the image ====== */

/* src's data copied into dst at the same offsets, its holes left holes:
** 0, or -1 and errno */
static int copy_sparse(int src, int dst, off_t size) {
  off_t at = 0;
  if (ioctl(dst, FICLONE, src) == 0) return 0;
  if (ftruncate(dst, size) < 0) return -1;
  while (at < size) {
    off_t data = lseek(src, at, SEEK_DATA), hole;
    if (data < 0) {
      if (errno == ENXIO) break; /* holes to the end */
      return -1;
    }
    hole = lseek(src, data, SEEK_HOLE);
    if (hole < 0) return -1;
    while (data < hole) {
      loff_t in = data, out = data;
      ssize_t n = copy_file_range(src, &in, dst, &out, (size_t)(hole - data), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP
                    || errno == EINVAL)) {
        char buf[65536];
        size_t want = (size_t)(hole - data) < sizeof buf ? (size_t)(hole - data)
                                                         : sizeof buf;
        n = pread(src, buf, want, data);
        if (n > 0) n = pwrite(dst, buf, (size_t)n, data);
      }
      if (n < 0) return -1;
      if (n == 0) {
        errno = EIO;
        return -1;
      }
      data += n;
    }
    at = hole;
  }
  return 0;
}

/* the image at img attached to a free loop device (autoclear), mounted at
** root: 0, or -1 and err (the device detached again) */
static int attach_mount(const char *img, const char *root, char *err,
                        size_t errlen) {
  struct loop_config cfg;
  char dev[64];
  int ctl, fd, lfd = -1, tries, e;
  fd = open(img, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    e = errno;
    snprintf(err, errlen, "cannot open %s: %s", img, strerror(e));
    errno = e;
    return -1;
  }
  ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (ctl < 0) {
    e = errno;
    snprintf(err, errlen, "/dev/loop-control: %s", strerror(e));
    close(fd);
    errno = e;
    return -1;
  }
  memset(&cfg, 0, sizeof cfg);
  cfg.fd = (unsigned)fd;
  cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
  snprintf((char *)cfg.info.lo_file_name, sizeof cfg.info.lo_file_name, "%s",
           img);
  for (tries = 0; tries < LOOP_TRIES; tries++) {
    int n = ioctl(ctl, LOOP_CTL_GET_FREE);
    if (n < 0) {
      e = errno;
      snprintf(err, errlen, "no free loop device: %s", strerror(e));
      goto fail;
    }
    snprintf(dev, sizeof dev, "/dev/loop%d", n);
    lfd = open(dev, O_RDWR | O_CLOEXEC);
    /* a /dev without devtmpfs: its node made here */
    if (lfd < 0 && errno == ENOENT
        && mknod(dev, S_IFBLK | 0660, makedev(7, (unsigned)n)) == 0)
      lfd = open(dev, O_RDWR | O_CLOEXEC);
    if (lfd < 0) {
      e = errno;
      snprintf(err, errlen, "cannot open %s: %s", dev, strerror(e));
      goto fail;
    }
    if (ioctl(lfd, LOOP_CONFIGURE, &cfg) == 0) break;
    e = errno;
    close(lfd);
    lfd = -1;
    if (e != EBUSY) {
      snprintf(err, errlen, "cannot attach %s to %s: %s", img, dev,
               strerror(e));
      goto fail;
    }
  }
  if (lfd < 0) {
    e = EBUSY;
    snprintf(err, errlen, "no free loop device after %d tries", LOOP_TRIES);
    goto fail;
  }
  close(ctl);
  close(fd);
  if (mkdir(root, 0755) < 0 && errno != EEXIST) {
    e = errno;
    snprintf(err, errlen, "cannot create %s: %s", root, strerror(e));
    ioctl(lfd, LOOP_CLR_FD, 0);
    close(lfd);
    errno = e;
    return -1;
  }
  if (mount(dev, root, "ext4", MS_NOSUID | MS_NODEV,
            disk.reserve ? MOUNT_DATA : MOUNT_DATA_SPARSE) < 0) {
    e = errno;
    snprintf(err, errlen, "cannot mount %s (%s) at %s: %s", img, dev, root,
             strerror(e));
    ioctl(lfd, LOOP_CLR_FD, 0);
    close(lfd);
    errno = e;
    return -1;
  }
  close(lfd); /* the mount holds the device now; its end detaches it */
  return 0;
fail:
  close(ctl);
  close(fd);
  errno = e;
  return -1;
}

int mp_ns_disk_make(const char *img, const char *root, char *err,
                    size_t errlen) {
  int src, dst, e;
  struct stat st;
  src = open(disk.empty, O_RDONLY | O_CLOEXEC);
  if (src < 0 || fstat(src, &st) < 0) {
    e = errno;
    snprintf(err, errlen, "cannot open %s: %s", disk.empty, strerror(e));
    if (src >= 0) close(src);
    errno = e;
    return -1;
  }
  dst = open(img, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (dst < 0 && errno == ENOENT) {
    char dir[4300], *slash;
    snprintf(dir, sizeof dir, "%s", img);
    slash = strrchr(dir, '/');
    if (slash != NULL) *slash = '\0';
    if (mastra__mkdirs(dir, 0700, NULL) == 0)
      dst = open(img, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  }
  if (dst < 0) {
    e = errno;
    snprintf(err, errlen, "cannot create %s: %s", img, strerror(e));
    close(src);
    errno = e;
    return -1;
  }
  if (copy_sparse(src, dst, st.st_size) < 0) {
    e = errno;
    snprintf(err, errlen, "cannot copy %s to %s: %s", disk.empty, img,
             strerror(e));
    close(src);
    close(dst);
    unlink(img);
    errno = e;
    return -1;
  }
  close(src);
  /* reserved: every block of it allocated now (unwritten: no data
  ** written), or ENOSPC, the create's 507 */
  if (disk.reserve && fallocate(dst, 0, 0, st.st_size) < 0) {
    e = errno;
    snprintf(err, errlen, "the data disk has no room for a sandbox's disk of"
             " %lld bytes (%s; --sandbox-disk-reserve off makes them sparse)",
             (long long)st.st_size, strerror(e));
    close(dst);
    unlink(img);
    errno = e;
    return -1;
  }
  if (close(dst) < 0) {
    e = errno;
    snprintf(err, errlen, "cannot write %s: %s", img, strerror(e));
    unlink(img);
    errno = e;
    return -1;
  }
  if (attach_mount(img, root, err, errlen) < 0) {
    e = errno;
    unlink(img);
    errno = e;
    return -1;
  }
  return 0;
}

/* root is a mount point: 1 (its device is not its parent's) */
static int is_mounted(const char *root) {
  char parent[4300], *slash;
  struct stat a, b;
  snprintf(parent, sizeof parent, "%s", root);
  slash = strrchr(parent, '/');
  if (slash == NULL || slash == parent) return 0;
  *slash = '\0';
  return stat(root, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

int mp_ns_disk_mount(const char *img, const char *root, char *err,
                     size_t errlen) {
  if (access(img, F_OK) < 0) return 0;
  if (is_mounted(root)) return 1; /* a killed server's: adopted */
  return attach_mount(img, root, err, errlen) < 0 ? -1 : 1;
}

void mp_ns_disk_unmount(const char *root) {
  if (umount2(root, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL
      && errno != ENOENT)
    mp_log("cannot unmount %s: %s", root, strerror(errno));
}

void mp_ns_disk_remove(const char *img, const char *root) {
  mp_ns_disk_unmount(root);
  if (unlink(img) < 0 && errno != ENOENT)
    mp_log("cannot remove %s: %s", img, strerror(errno));
}

int mp_ns_disk_move(const char *from, const char *to, char *err,
                    size_t errlen) {
  /* MS_MOVE refuses a mount whose parent is shared (a systemd host's /) */
  if (mkdir(to, 0755) < 0 && errno != EEXIST) {
    snprintf(err, errlen, "cannot create %s: %s", to, strerror(errno));
    return -1;
  }
  if (mount(from, to, NULL, MS_BIND, NULL) < 0) {
    snprintf(err, errlen, "cannot bind %s at %s: %s", from, to,
             strerror(errno));
    rmdir(to);
    return -1;
  }
  mp_ns_disk_unmount(from);
  return 0;
}

/* }====== */

/* mountinfo's octal escapes (\040 a space) undone in place */
static void unescape(char *s) {
  char *o = s;
  for (; *s; s++) {
    if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0'
        && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
      *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
      s += 3;
    } else {
      *o++ = *s;
    }
  }
  *o = '\0';
}

/* the last mount point at or under dir in /proc/self/mountinfo (the
** newest, so the deepest first), into point: 1, or 0 when none */
static int last_under(const char *dir, char *point, size_t n) {
  FILE *f = fopen("/proc/self/mountinfo", "re");
  char *line = NULL, here[4300];
  size_t cap = 0, len = strlen(dir);
  int found = 0;
  if (f == NULL) return 0;
  while (getline(&line, &cap, f) > 0) {
    /* ID PARENT MAJ:MIN ROOT POINT ... */
    if (sscanf(line, "%*s %*s %*s %*s %4299s", here) != 1) continue;
    unescape(here);
    if (strncmp(here, dir, len) == 0 && (here[len] == '\0' || here[len] == '/')) {
      snprintf(point, n, "%s", here);
      found = 1;
    }
  }
  free(line);
  fclose(f);
  return found;
}

void mp_ns_disk_sweep(const char *dir) {
  char point[4300];
  int tries;
  for (tries = 0; tries < 10000 && last_under(dir, point, sizeof point); tries++) {
    mp_log("unmounting %s, a previous server's", point);
    if (umount2(point, MNT_DETACH | UMOUNT_NOFOLLOW) < 0) {
      mp_log("cannot unmount %s: %s", point, strerror(errno));
      return;
    }
  }
}

/* (ns_disk.h) DATA/disks after the records are loaded: the image of a
** sandbox with no record (a server killed between a create's image and
** its record, or a record forgotten since) goes, its mount first, and so
** does an empty image of other flags. A destroyed record's is kept: its teardown
** removed it, unless its disk could not be mounted at this start (its
** files stay until the record is forgotten) */
void mp_ns_disk_sweep_orphans(mp_server *srv) {
  char dir[4200], path[4500], root[4500], id[MP_ID_MAX];
  struct dirent *e;
  DIR *d;
  snprintf(dir, sizeof dir, "%s/disks", srv->data_dir);
  d = opendir(dir);
  if (d == NULL) return;
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    const mp_sandbox *sb;
    if (e->d_name[0] == '.' || n <= 4 || strcmp(e->d_name + n - 4, ".img") != 0)
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (strncmp(e->d_name, "empty-", 6) == 0) {
      if (!is_empty_image(path)) unlink(path);
      continue;
    }
    if (n - 4 >= sizeof id) continue;
    memcpy(id, e->d_name, n - 4);
    id[n - 4] = '\0';
    sb = mp_index_get(&srv->sandbox_index, id);
    if (sb != NULL) continue;
    mp_log("removing %s, the disk of no sandbox", path);
    snprintf(root, sizeof root, "%s/sandboxes/%s", srv->data_dir, id);
    mp_ns_disk_remove(path, root);
  }
  closedir(d);
}
