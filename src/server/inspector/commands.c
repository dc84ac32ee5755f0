/*
** `mastra-platform inspect [--data-dir DIR]` (see inspector.h): find the
** running platform of a data directory (DATA_DIR/state/inspector.json,
** written by its inspector), ask it for a one-time login link with the
** platform token (POST /api/login-links) and print the link. Without
** --data-dir it looks in the default data directory of `serve`, then in
** the per-user daemon's (STATE_DIR/platform-data, docs/platform.md).
** A command-line client: it may block.
*/
#define _GNU_SOURCE
#include "inspector/inspector.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "util.h"

/* the per-user daemon's data directory, as lua/mastra/local_platform.lua
** finds it */
static void daemon_data_dir(char *out, size_t n) {
  const char *sd = getenv("MASTRA_PLATFORM_STATE_DIR");
  const char *xdg = getenv("XDG_STATE_HOME");
  const char *home = getenv("HOME");
  if (sd != NULL && sd[0] != '\0')
    snprintf(out, n, "%s/platform-data", sd);
  else if (xdg != NULL && xdg[0] == '/')
    snprintf(out, n, "%s/mastra/platform-data", xdg);
  else
    snprintf(out, n, "%s/.local/state/mastra/platform-data",
             home && home[0] ? home : "/tmp");
}

/* DATA_DIR/state/inspector.json ({url, pid, tokenFile}); NULL if none */
static cJSON *inspector_state(const char *dir) {
  char path[4200], *text;
  cJSON *o;
  snprintf(path, sizeof path, "%s/state/inspector.json", dir);
  if (mastra__read_file(path, &text, NULL) < 0) return NULL;
  o = cJSON_Parse(text);
  free(text);
  if (!cJSON_IsString(cJSON_GetObjectItem(o, "url"))
      || !cJSON_IsString(cJSON_GetObjectItem(o, "tokenFile"))) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

/* POST /api/login-links over one connection; the answer's body, or NULL */
static char *ask(const char *url, const char *token, char *err, size_t n) {
  char host[256], port[16], req[1024], *resp = NULL;
  struct addrinfo hints, *ai = NULL;
  size_t len = 0;
  int fd = -1;
  ssize_t got;
  if (sscanf(url, "http://%255[^/]/", host) != 1) {
    snprintf(err, n, "cannot read the address '%s'", url);
    return NULL;
  }
  {
    char *colon = strrchr(host, ':');
    if (colon == NULL) {
      snprintf(err, n, "no port in '%s'", url);
      return NULL;
    }
    snprintf(port, sizeof port, "%s", colon + 1);
    *colon = '\0';
  }
  snprintf(req, sizeof req,
           "POST /api/login-links HTTP/1.0\r\nHost: %s:%s\r\n"
           "Authorization: Bearer %s\r\nContent-Length: 0\r\n\r\n",
           host, port, token);
  if (host[0] == '[') { /* [::1] */
    memmove(host, host + 1, strlen(host));
    host[strlen(host) - 1] = '\0';
  }
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, port, &hints, &ai) != 0 || ai == NULL
      || (fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0
      || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0
      || write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
    snprintf(err, n, "cannot reach the inspector at %s (is the platform"
             " running?)", url);
    if (fd >= 0) close(fd);
    if (ai) freeaddrinfo(ai);
    return NULL;
  }
  freeaddrinfo(ai);
  for (;;) {
    char *p = realloc(resp, len + 4097);
    if (p == NULL) break;
    resp = p;
    got = read(fd, resp + len, 4096);
    if (got <= 0) break;
    len += (size_t)got;
  }
  close(fd);
  if (resp == NULL) return NULL;
  resp[len] = '\0';
  if (strncmp(resp, "HTTP/1.", 7) != 0 || strncmp(resp + 9, "201", 3) != 0) {
    char *body = strstr(resp, "\r\n\r\n");
    snprintf(err, n, "the inspector refused: %.300s", body ? body + 4 : resp);
    free(resp);
    return NULL;
  }
  return resp;
}

int mp_inspect_main(int argc, char **argv, const char *default_data_dir) {
  char daemon_dir[4200], err[600], *resp, *text, *body;
  const char *dir = NULL, *url, *token_file;
  size_t tlen;
  cJSON *state, *o;
  int i;
  for (i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--data-dir") == 0 && i + 1 < argc) {
      dir = argv[++i];
    } else {
      fprintf(stderr, "usage: mastra-platform inspect [--data-dir DIR]\n");
      return 2;
    }
  }
  daemon_data_dir(daemon_dir, sizeof daemon_dir);
  if (dir == NULL)
    dir = (state = inspector_state(default_data_dir)) != NULL ? default_data_dir
                                                              : daemon_dir;
  else
    state = NULL;
  if (state == NULL && (state = inspector_state(dir)) == NULL) {
    fprintf(stderr, "mastra-platform: no platform with an inspector runs on"
            " %s (no %s/state/inspector.json); start one with"
            " `mastra-platform serve`, or name its --data-dir\n", dir, dir);
    return 1;
  }
  url = cJSON_GetObjectItem(state, "url")->valuestring;
  token_file = cJSON_GetObjectItem(state, "tokenFile")->valuestring;
  if (mastra__read_file(token_file, &text, &tlen) < 0) {
    fprintf(stderr, "mastra-platform: cannot read the token %s\n", token_file);
    cJSON_Delete(state);
    return 1;
  }
  while (tlen > 0 && (text[tlen - 1] == '\n' || text[tlen - 1] == ' '))
    text[--tlen] = '\0';
  resp = ask(url, text, err, sizeof err);
  free(text);
  cJSON_Delete(state);
  if (resp == NULL) {
    fprintf(stderr, "mastra-platform: %s\n", err);
    return 1;
  }
  body = strstr(resp, "\r\n\r\n");
  o = cJSON_Parse(body ? body + 4 : "");
  free(resp);
  if (!cJSON_IsString(cJSON_GetObjectItem(o, "url"))) {
    cJSON_Delete(o);
    fprintf(stderr, "mastra-platform: the inspector's answer has no link\n");
    return 1;
  }
  printf("%s\n", cJSON_GetObjectItem(o, "url")->valuestring);
  cJSON_Delete(o);
  return 0;
}
