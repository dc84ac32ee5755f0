/*
** mastra-platform: a local server that speaks the Mastra Platform API.
**
**   mastra-platform serve [--listen HOST:PORT] [--data-dir DIR]
**                         [--token-file FILE]
**                         [--driver process|namespaces] [--base DIR] [--egress]
**                         [--sandbox-pids-max N] [--sandbox-memory-max SIZE]
**                         [--warm-pool N]
**                         [--idle-exit SECONDS] [--lease-ttl SECONDS]
**                         [--checkpoint-retention DAYS]
**                         [--checkpoint-retention-unused DAYS]
**                         [--template-retention DAYS]
**                         [--default-idle-minutes M]
**                         [--inspector HOST:PORT|off] [--session-history N]
**   mastra-platform base build [--data-dir DIR | --base DIR] [--minimal]
**   mastra-platform inspect [--data-dir DIR]
**   mastra-platform ps [--data-dir DIR]
**   mastra-platform destroy [--data-dir DIR] ID...
**   mastra-platform logs [--data-dir DIR] [--sandbox ID] [-n N]
**   mastra-platform --version
**
** Once listening it prints one JSON line on stdout:
**   {"url":"http://127.0.0.1:PORT","pid":N,"dataDir":"...","tokenFile":"...",
**    "inspector":"http://127.0.0.1:PORT2/","inspectorLogin":"...login?code=..."}
** and logs on stderr. SIGTERM (or SIGINT, SIGHUP) stops every command,
** captures the checkpoints, writes the state and exits with status 0;
** nothing it started runs after it exited.
**
** This file reads the options, prepares the data directory and the token,
** starts the parts (the bucket store, the sandbox records, the HTTP
** daemon), kills what a previous instance left running, runs the loop and
** stops the parts in order. The server's state
** is one mp_server on main's stack, passed to every part; the signals
** arrive through a signalfd watched by the loop.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mastra_version.h"
#include "sandbox/checkpoint.h"
#include "drivers/drivers.h"
#include "drivers/ns/base.h"
#include "drivers/ns/init/ns_exec.h"
#include "drivers/ns/init/ns_init.h"
#include "api/exec_legacy.h"
#include "sandbox/activity.h"
#include "inspector/diskuse.h"
#include "api/exec_ws.h"
#include "api/router.h"
#include "http/httpd.h"
#include "inspector/inspector.h"
#include "util/log.h"
#include "sandbox/sandbox.h"
#include "sandbox/execs.h"
#include "sandbox/startup.h"
#include "util/parse.h"
#include "sandbox/template.h"
#include "util/trash.h"
#include "util.h"

#define DEFAULT_LEASE_TTL_S 900
#define DEFAULT_CHECKPOINT_RETENTION_DAYS 7.0
#define DEFAULT_CHECKPOINT_RETENTION_UNUSED_DAYS 1.0
#define DEFAULT_TEMPLATE_RETENTION_DAYS 7.0
#define DEFAULT_MAX_BODY (1u << 20)
#define DEFAULT_MAX_OBJECT ((size_t)256 << 20)
#define DEFAULT_IDLE_MINUTES 30.0
#define DEFAULT_SESSION_HISTORY 200
/* shutdown: commands get SIGTERM, then SIGKILL after their grace period
** (MASTRA__PROC_KILL_GRACE_MS); the server waits this long in all */
#define SHUTDOWN_WAIT_MS 5000

static void usage(FILE *f) {
  fprintf(f,
          "usage: mastra-platform serve [options]\n"
          "  --listen HOST:PORT   address to listen on (default 127.0.0.1:0,"
          " a free port)\n"
          "  --data-dir DIR       state, checkpoints and buckets (default"
          " $XDG_DATA_HOME/mastra/platform)\n"
          "  --token-file FILE    the bearer token; created if missing"
          " (default DATA_DIR/token)\n"
          "  --driver NAME        how sandboxes run: namespaces (isolated;"
          " the default\n"
          "                       where it can run) or process\n"
          "                       (env MASTRA_PLATFORM_DRIVER)\n");
  mp_driver_usage(f);
  fprintf(f,
          "  --idle-exit SECONDS  exit after SECONDS with no request and no"
          " sandbox (default: never)\n"
          "  --lease-ttl SECONDS  lifetime of exec leases (default 900)\n"
          "  --checkpoint-retention DAYS\n"
          "                       remove checkpoints unused for DAYS"
          " (fractions allowed;\n"
          "                       default 7; 0: keep them forever)\n"
          "  --checkpoint-retention-unused DAYS\n"
          "                       remove checkpoints that no create restored"
          " (nor asked\n"
          "                       for) after DAYS unused (default 1; at most"
          " the above;\n"
          "                       0: as long as the above)\n"
          "  --template-retention DAYS\n"
          "                       remove templates that no sandbox used for"
          " DAYS (never one\n"
          "                       in use; default 7; 0: keep them)\n"
          "  --default-idle-minutes M\n"
          "                       reap a sandbox created without"
          " idleTimeoutMinutes after M\n"
          "                       minutes with no command running"
          " (fractions allowed;\n"
          "                       default 30; 0: never); its checkpoint"
          " is kept\n"
          "  --destroyed-ttl SECONDS\n"
          "                       keep the record of a destroyed sandbox"
          " (GET shows\n"
          "                       destroyedAt) this long (default 600)\n"
          "  --destroyed-max N    keep at most N destroyed records; a destroy"
          " past N\n"
          "                       forgets the oldest (default 1000)\n"
          "  --destroy-wait SECONDS\n"
          "                       a destroy answers once no process of the"
          " sandbox is\n"
          "                       left; past SECONDS after their SIGKILL, 500"
          " saying what\n"
          "                       is left (1 to 3600; default 10)\n"
          "  --header-timeout SECONDS\n"
          "                       a request's head must arrive within"
          " SECONDS (default 30)\n"
          "  --exec-stdin on|off  stream stdin to exec WebSocket commands and"
          " advertise it\n"
          "                       in exec leases (default on; off: stdin is"
          " /dev/null,\n"
          "                       as on the hosted platform)\n"
          "  --exec-log-max SIZE  output a resumable exec keeps for its"
          " client (both\n"
          "                       streams; k, m, g suffixes; default 256m,"
          " at least 64k);\n"
          "                       past it the command blocks on its writes"
          " until the\n"
          "                       client acknowledges output\n"
          "  --exec-log-total SIZE\n"
          "                       the same for all resumable execs together"
          " (default 1g);\n"
          "                       past it the oldest ended exec is evicted,"
          " and with\n"
          "                       none the commands block\n"
          "  --exec-ping TIME     ping the socket of an attached resumable"
          " exec every TIME\n"
          "                       (seconds, or with s, m, h; default 10;"
          " 0: never), so\n"
          "                       that a client can tell a dead connection"
          " from a quiet\n"
          "                       command\n"
          "  --exec-retain TIME   keep an ended resumable exec (its output"
          " and exit) for\n"
          "                       TIME after its end or its last"
          " acknowledgement\n"
          "                       (seconds, or with s, m, h; default 15m)\n"
          "  --inspector HOST:PORT|off\n"
          "                       the inspector's address (default: the"
          " --listen host,\n"
          "                       a free port); off: no inspector\n"
          "  --session-history N  exec sessions kept per environment for the"
          " inspector\n"
          "                       (default 200)\n"
          "       mastra-platform base build [--data-dir DIR | --base DIR]"
          " [--minimal]\n"
          "       mastra-platform inspect [--data-dir DIR]\n"
          "                       print a one-time login link to the running"
          " platform's inspector\n"
          "       mastra-platform ps [--data-dir DIR]\n"
          "                       list the running platform's live sandboxes\n"
          "       mastra-platform destroy [--data-dir DIR] ID...\n"
          "                       destroy sandboxes (their checkpoints are"
          " kept)\n"
          "       mastra-platform logs [--data-dir DIR] [--sandbox ID] [-n N]\n"
          "                       the exec sessions the inspector keeps,"
          " oldest first\n"
          "       mastra-platform --version\n");
}

static char *default_data_dir(void) {
  const char *xdg = getenv("XDG_DATA_HOME");
  const char *home = getenv("HOME");
  char buf[4096];
  if (xdg != NULL && xdg[0] == '/')
    snprintf(buf, sizeof buf, "%s/mastra/platform", xdg);
  else
    snprintf(buf, sizeof buf, "%s/.local/share/mastra/platform",
             home && home[0] ? home : "/tmp");
  return strdup(buf);
}

/* Read the token, or create one (0600) when the file does not exist. */
static int load_token(mp_server *srv, const char *path) {
  char *text;
  size_t len;
  if (mastra__read_file(path, &text, &len) == 0) {
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'
                       || text[len - 1] == ' '))
      text[--len] = '\0';
    if (len == 0 || len >= sizeof srv->token) {
      fprintf(stderr, "mastra-platform: the token in %s is empty or longer"
              " than %zu bytes\n", path, sizeof srv->token - 1);
      free(text);
      return -1;
    }
    memcpy(srv->token, text, len + 1);
    srv->token_len = len;
    free(text);
    return 0;
  }
  if (errno != ENOENT) {
    fprintf(stderr, "mastra-platform: cannot read %s: %s\n", path,
            strerror(errno));
    return -1;
  }
  if (mastra__random_hex(srv->token, 32) < 0) return -1;
  srv->token_len = strlen(srv->token);
  {
    mode_t old = umask(077);
    int rc = mastra__write_file_atomic(path, srv->token, srv->token_len, 0600, 1);
    umask(old);
    if (rc < 0) {
      fprintf(stderr, "mastra-platform: cannot write %s: %s\n", path,
              strerror(errno));
      return -1;
    }
  }
  return 0;
}

static int parse_seconds(const char *flag, const char *v, long *out) {
  char *end;
  long n = v ? strtol(v, &end, 10) : -1;
  if (v == NULL || *v == '\0' || *end != '\0' || n < 0) {
    fprintf(stderr, "mastra-platform: %s wants a number of seconds (got"
            " '%s')\n", flag, v ? v : "");
    return -1;
  }
  *out = n;
  return 0;
}

/* seconds, or a number with s, m or h; into milliseconds */
static int parse_duration(const char *flag, const char *v, uint64_t *out) {
  char *end;
  double n = v ? strtod(v, &end) : -1;
  double unit = 1000;
  if (v != NULL && *v != '\0' && end != v) {
    if (strcmp(end, "m") == 0) unit = 60000;
    else if (strcmp(end, "h") == 0) unit = 3600000;
    else if (strcmp(end, "s") == 0 || *end == '\0') unit = 1000;
    else n = -1;
  }
  if (v == NULL || *v == '\0' || end == v || !(n >= 0) || n > 1e7) {
    fprintf(stderr, "mastra-platform: %s wants a time: seconds, or a number"
            " with s, m or h (got '%s')\n", flag, v ? v : "");
    return -1;
  }
  *out = (uint64_t)(n * unit);
  return 0;
}

/* an integer from lo to hi; what names it in the error ("a count") */
static int parse_bounded(const char *flag, const char *v, long lo, long hi,
                         const char *what, long *out) {
  char *end;
  long n = v ? strtol(v, &end, 10) : -1;
  if (v == NULL || *v == '\0' || *end != '\0' || n < lo || n > hi) {
    fprintf(stderr, "mastra-platform: %s wants %s between %ld and %ld"
            " (got '%s')\n", flag, what, lo, hi, v ? v : "");
    return -1;
  }
  *out = n;
  return 0;
}

static int parse_count(const char *flag, const char *v, long lo, long hi,
                       long *out) {
  return parse_bounded(flag, v, lo, hi, "a count", out);
}

static int parse_days(const char *flag, const char *v, double *out) {
  char *end;
  double d = strtod(v, &end);
  if (*v == '\0' || *end != '\0' || !(d >= 0) || d > 36500) {
    fprintf(stderr, "mastra-platform: %s wants a number of days between 0"
            " and 36500 (got '%s')\n", flag, v);
    return -1;
  }
  *out = d;
  return 0;
}

static int parse_minutes(const char *flag, const char *v, double *out) {
  char *end;
  double m = v ? strtod(v, &end) : -1;
  if (v == NULL || *v == '\0' || *end != '\0' || !(m >= 0 && m <= 525600)) {
    fprintf(stderr, "mastra-platform: %s wants a number of minutes between 0"
            " and 525600 (got '%s')\n", flag, v ? v : "");
    return -1;
  }
  *out = m;
  return 0;
}

/* Before serving: kill what a previous instance left running (after a
** crash), and wait until it is gone. */
static void kill_previous(mp_server *srv) {
  int64_t deadline = mastra__wall_ms() + SHUTDOWN_WAIT_MS;
  while (mp_sandbox_kill_previous(srv) > 0 && mastra__wall_ms() < deadline)
    usleep(10000);
}

/* Run the loop (and the HTTP daemon: answers still go out) for at most
** ms, until done(srv) is 0. */
static void run_until(mp_server *srv, size_t (*done)(mp_server *),
                      int64_t deadline) {
  while (done(srv) > 0 && mastra__wall_ms() < deadline) {
    mastra__loop_run_once(srv->loop, 20);
    mp_httpd_run(srv->api);
  }
}

/* Stop in order: exec sockets close and their commands are let go of,
** every command gets SIGTERM; legacy execs answer as their commands end;
** what is left is let go of, checkpoints are captured and records saved;
** then every process of every sandbox is killed and the server waits,
** on the loop, until none is left (or the deadline). */
static void shut_down(mp_server *srv) {
  int64_t deadline = mastra__wall_ms() + SHUTDOWN_WAIT_MS;
  srv->stopping = 1;
  mp_httpd_quiesce(srv->api);
  mp_ws_exec_shutdown_all(srv);
  mp_sandbox_stop_all(srv);
  run_until(srv, mp_sandbox_running_count,
            mastra__wall_ms() + MASTRA__PROC_KILL_GRACE_MS + 500);
  mp_exec_legacy_shutdown_all(srv);
  mp_execs_release_polls(srv); /* suspended long polls answer now */
  mp_sandbox_shutdown_all(srv);
  run_until(srv, mp_sandbox_kill_all, deadline);
  if (mp_sandbox_kill_all(srv) > 0)
    mp_log("some sandbox processes were still alive at the deadline");
}

static void on_signal(mastra__io *io, uint32_t revents) {
  mp_server *srv = io->data;
  struct signalfd_siginfo si;
  (void)revents;
  while (read(io->fd, &si, sizeof si) == (ssize_t)sizeof si) {
    mp_log("signal %u: shutting down", si.ssi_signo);
    srv->stopping = 1;
  }
}

int main(int argc, char **argv) {
  mp_server srv;
  const char *listen = "127.0.0.1:0", *token_file = NULL;
  const char *driver = getenv("MASTRA_PLATFORM_DRIVER");
  const char *inspector = NULL;
  char inspector_listen[80], login[256] = "";
  long history = DEFAULT_SESSION_HISTORY;
  const char *data_dir = NULL; /* argv's: nothing to free on a bad flag */
  char *token_path = NULL;
  char err[1024], path[4200];
  long idle_exit = 0, lease_ttl = DEFAULT_LEASE_TTL_S;
  long destroyed_ttl = MP_DESTROYED_TTL_DEFAULT_S;
  long destroyed_max = MP_DESTROYED_MAX_DEFAULT;
  long destroy_wait = MP_DESTROY_WAIT_DEFAULT_S;
  long header_timeout = MP_HEADER_TIMEOUT_DEFAULT_S;
  double retention = DEFAULT_CHECKPOINT_RETENTION_DAYS;
  double retention_unused = DEFAULT_CHECKPOINT_RETENTION_UNUSED_DAYS;
  double template_retention = DEFAULT_TEMPLATE_RETENTION_DAYS;
  int exec_stdin = 1;
  uint64_t exec_log_max = MP_EXEC_LOG_MAX_DEFAULT;
  uint64_t exec_log_total = MP_EXEC_LOG_TOTAL_DEFAULT;
  uint64_t exec_retain_ms = MP_EXEC_RETAIN_DEFAULT_MS;
  uint64_t exec_ping_ms = MP_EXEC_PING_DEFAULT_MS;
  double default_idle = DEFAULT_IDLE_MINUTES;
  sigset_t sigs;
  mastra__io sig_io;
  const mp_driver_flag *flag;
  int i, sfd = -1, status = 0;

  if (argc >= 2 && strcmp(argv[1], MP_NS_INIT_ARG) == 0)
    return mp_ns_init_main(argc, argv);
  if (argc >= 2 && strcmp(argv[1], MP_NS_EXEC_ARG) == 0)
    return mp_ns_exec_main(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "base") == 0)
    return mp_base_command(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
    printf("mastra-platform %s\n", MASTRA_VERSION_STRING);
    return 0;
  }
  if (argc >= 2 && (strcmp(argv[1], "inspect") == 0
                    || strcmp(argv[1], "ps") == 0
                    || strcmp(argv[1], "destroy") == 0
                    || strcmp(argv[1], "logs") == 0)) {
    char *dir = default_data_dir();
    int rc = mp_shell_main(argc, argv, dir);
    free(dir);
    return rc;
  }
  if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0
                    || strcmp(argv[1], "help") == 0)) {
    usage(stdout);
    return 0;
  }
  if (argc < 2 || strcmp(argv[1], "serve") != 0) {
    usage(stderr);
    return 2;
  }
  for (i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    }
    flag = mp_driver_flag_find(a);
    if (flag != NULL && flag->arg == NULL) { /* a driver's switch */
      if (flag->set(NULL, err, sizeof err) < 0) goto flag_fail;
      continue;
    }
    if (v == NULL) {
      fprintf(stderr, "mastra-platform: %s needs a value\n", a);
      usage(stderr);
      return 2;
    }
    i++;
    if (strcmp(a, "--listen") == 0
        || (strcmp(a, "--inspector") == 0 && strcmp(v, "off") != 0)) {
      /* checked now, before a base is built or a record is read */
      struct sockaddr_storage ss;
      char host[64];
      if (mp_parse_listen(v, &ss, host, sizeof host, err, sizeof err) < 0) {
        fprintf(stderr, "mastra-platform: %s %s\n", a, err);
        return 2;
      }
    }
    if (strcmp(a, "--listen") == 0) listen = v;
    else if (strcmp(a, "--data-dir") == 0) data_dir = v;
    else if (strcmp(a, "--token-file") == 0) token_file = v;
    else if (strcmp(a, "--driver") == 0) driver = v;
    else if (flag != NULL) {
      if (flag->set(v, err, sizeof err) < 0) goto flag_fail;
    } else if (strcmp(a, "--idle-exit") == 0) {
      if (parse_seconds(a, v, &idle_exit) < 0) return 2;
    } else if (strcmp(a, "--default-idle-minutes") == 0) {
      if (parse_minutes(a, v, &default_idle) < 0) return 2;
    } else if (strcmp(a, "--lease-ttl") == 0) {
      if (parse_seconds(a, v, &lease_ttl) < 0 || lease_ttl == 0) return 2;
    } else if (strcmp(a, "--inspector") == 0) {
      inspector = v;
    } else if (strcmp(a, "--session-history") == 0) {
      if (parse_count(a, v, 1, 100000, &history) < 0) return 2;
    } else if (strcmp(a, "--destroyed-ttl") == 0) {
      if (parse_seconds(a, v, &destroyed_ttl) < 0) return 2;
    } else if (strcmp(a, "--destroyed-max") == 0) {
      if (parse_count(a, v, 1, MP_DESTROYED_MAX_LIMIT, &destroyed_max) < 0)
        return 2;
    } else if (strcmp(a, "--destroy-wait") == 0) {
      if (parse_bounded(a, v, 1, 3600, "a number of seconds", &destroy_wait)
          < 0)
        return 2;
    } else if (strcmp(a, "--header-timeout") == 0) {
      if (parse_seconds(a, v, &header_timeout) < 0 || header_timeout == 0)
        return 2;
    } else if (strcmp(a, "--checkpoint-retention") == 0) {
      if (parse_days(a, v, &retention) < 0) return 2;
    } else if (strcmp(a, "--checkpoint-retention-unused") == 0) {
      if (parse_days(a, v, &retention_unused) < 0) return 2;
    } else if (strcmp(a, "--template-retention") == 0) {
      if (parse_days(a, v, &template_retention) < 0) return 2;
    } else if (strcmp(a, "--exec-stdin") == 0) {
      if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0) {
        fprintf(stderr, "mastra-platform: --exec-stdin wants on or off (got"
                " '%s')\n", v);
        return 2;
      }
      exec_stdin = strcmp(v, "on") == 0;
    } else if (strcmp(a, "--exec-log-max") == 0) {
      long long n = mp_parse_size(v);
      if (n < (long long)MP_EXEC_LOG_MAX_MIN) {
        fprintf(stderr, "mastra-platform: --exec-log-max wants a size of at"
                " least 64k, such as 256m (got '%s')\n", v);
        return 2;
      }
      exec_log_max = (uint64_t)n;
    } else if (strcmp(a, "--exec-log-total") == 0) {
      long long n = mp_parse_size(v);
      if (n < (long long)MP_EXEC_LOG_MAX_MIN) {
        fprintf(stderr, "mastra-platform: --exec-log-total wants a size of"
                " at least 64k, such as 1g (got '%s')\n", v);
        return 2;
      }
      exec_log_total = (uint64_t)n;
    } else if (strcmp(a, "--exec-retain") == 0) {
      if (parse_duration(a, v, &exec_retain_ms) < 0) return 2;
    } else if (strcmp(a, "--exec-ping") == 0) {
      if (parse_duration(a, v, &exec_ping_ms) < 0) return 2;
    } else {
      fprintf(stderr, "mastra-platform: unknown option '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  memset(&srv, 0, sizeof srv);
  srv.max_body = DEFAULT_MAX_BODY;
  srv.max_object = DEFAULT_MAX_OBJECT;
  srv.lease_ttl_ms = (uint64_t)lease_ttl * 1000;
  srv.destroyed_ttl_ms = (int64_t)destroyed_ttl * 1000;
  srv.destroyed_max = (size_t)destroyed_max;
  srv.destroy_wait_ms = (int64_t)destroy_wait * 1000;
  srv.header_timeout_s = (unsigned)header_timeout;
  srv.idle_exit_s = (int)idle_exit;
  srv.checkpoint_retention_days = retention;
  srv.checkpoint_retention_unused_days = retention_unused;
  srv.template_retention_days = template_retention;
  srv.default_idle_min = default_idle;
  srv.exec_stdin = exec_stdin;
  srv.exec_log_max = exec_log_max;
  srv.exec_ping_ms = exec_ping_ms;
  srv.exec_log_total = exec_log_total;
  srv.exec_retain_ms = exec_retain_ms;
  srv.drop_execs = mp_execs_drop;
  srv.data_dir = data_dir ? strdup(data_dir) : default_data_dir();
  mastra__raise_nofile();
  signal(SIGPIPE, SIG_IGN);
  /* the sandboxes' trees, the base and what commands create get the modes
  ** a system's tools expect whatever umask started the server; the
  ** server's own files have explicit, private modes (docs/platform.md,
  ** "Files") */
  umask(022);

  snprintf(path, sizeof path, "%s", srv.data_dir);
  /* private to the server's user: records hold env secrets, buckets and
  ** checkpoints the sandboxes' files (docs/platform.md, "Files") */
  if (mastra__mkdirs(path, 0700, NULL) < 0 || chmod(path, 0700) < 0)
    goto dir_fail;
  if (token_file == NULL) {
    snprintf(path, sizeof path, "%s/token", srv.data_dir);
    token_path = strdup(path);
  } else {
    token_path = strdup(token_file);
  }
  if (load_token(&srv, token_path) < 0) return 1;
  if (mp_driver_pick(&srv, driver) < 0) return 2;
  if (mp_server_open(&srv, err, sizeof err) < 0) {
    fprintf(stderr, "mastra-platform: %s\n", err);
    mp_driver_finish(&srv);
    return 1;
  }
  kill_previous(&srv);
  mp_trash_empty(&srv);
  mp_driver_start(&srv);
  mp_template_load(&srv);
  mp_template_start(&srv);
  /* from here on a failure stops what started, as an exit does */
  if (mp_checkpoint_start(&srv) < 0
      || mp_activity_start(&srv, (size_t)history) < 0) {
    status = 1;
    goto stop;
  }

  /* SIGTERM, SIGINT and SIGHUP (a closed terminal) arrive through the loop */
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);
  sigprocmask(SIG_BLOCK, &sigs, NULL);
  sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
  mastra__io_init(srv.loop, &sig_io, sfd, on_signal, &srv);
  mastra__io_start(&sig_io, EPOLLIN);

  if (mp_api_start(&srv, listen, err, sizeof err) < 0) {
    fprintf(stderr, "mastra-platform: %s\n", err);
    status = 1;
    goto stop;
  }
  if (inspector == NULL) { /* the --listen host, a free port */
    snprintf(inspector_listen, sizeof inspector_listen, "%.*s:0",
             (int)(strrchr(listen, ':') - listen), listen);
    inspector = inspector_listen;
  }
  if (strcmp(inspector, "off") != 0
      && (mp_inspector_start(&srv, inspector, token_path, err, sizeof err) < 0
          || mp_inspector_login_link(&srv, login, sizeof login) < 0)) {
    fprintf(stderr, "mastra-platform: %s\n", err);
    status = 1;
    goto stop;
  }
  printf("{\"url\":\"%s\",\"pid\":%d,\"dataDir\":\"%s\",\"tokenFile\":\"%s\"",
         srv.base_url, (int)getpid(), srv.data_dir, token_path);
  if (srv.inspector != NULL)
    printf(",\"inspector\":\"%s\",\"inspectorLogin\":\"%s\"",
           mp_inspector_url(&srv), login);
  printf("}\n");
  fflush(stdout);
  mp_log("listening on %s (data %s, driver %s)", srv.base_url, srv.data_dir,
         srv.driver->name);
  if (srv.inspector != NULL)
    mp_log("inspector on %s (log in: mastra-platform inspect)",
           mp_inspector_url(&srv));
  srv.last_request_ms = mastra__wall_ms();

  while (!srv.stopping) {
    int t = mp_httpd_timeout(srv.api), ti = mp_inspector_timeout(&srv);
    const uint64_t *ids;
    if (ti >= 0 && (t < 0 || ti < t)) t = ti;
    if (srv.idle_exit_s > 0 && (t < 0 || t > 1000)) t = 1000;
    mastra__loop_run_once(srv.loop, t);
    mp_httpd_run(srv.api);
    mp_inspector_run(&srv);
    mastra__loop_take_signals(srv.loop, &ids); /* unused: C callbacks here */
    if (srv.idle_exit_s > 0 && mp_sandbox_live_count(&srv) == 0
        && mp_ws_exec_count(&srv) == 0
        && mastra__wall_ms() - srv.last_request_ms > (int64_t)srv.idle_exit_s * 1000) {
      mp_log("idle for %ds with no sandbox: exiting", srv.idle_exit_s);
      break;
    }
  }

stop:
  mp_inspector_stop(&srv);
  shut_down(&srv);
  mp_checkpoint_stop(&srv);
  mp_httpd_stop(srv.api);
  srv.api = NULL;
  mp_diskuse_free(srv.diskuse);
  if (sfd >= 0) {
    mastra__io_stop(&sig_io);
    close(sfd);
  }
  mp_server_close(&srv);
  mp_driver_finish(&srv);
  mp_activity_stop(&srv);
  mp_log(status == 0 ? "stopped" : "stopped: it could not start");
  free(srv.data_dir);
  free(token_path);
  return status;

dir_fail:
  fprintf(stderr, "mastra-platform: cannot create %s: %s\n", path,
          strerror(errno));
  return 1;
flag_fail:
  fprintf(stderr, "mastra-platform: %s\n", err);
  return 2;
}
