/*
** Opening and closing mastra-platform's state (startup.h): the data
** directories (state, checkpoints, sandboxes, buckets), the bucket store,
** the loop, the records of DATA/state/sandboxes.
*/
#include "sandbox/startup.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bucket/bucket.h"
#include "sandbox/lease.h"
#include "sandbox/sandbox.h"
#include "sandbox/template.h"
#include "util/trash.h"
#include "util.h"

int mp_server_open(mp_server *srv, char *err, size_t errlen) {
  static const char *const dirs[] = {"state", "checkpoints", "sandboxes"};
  char path[4200];
  size_t i;
  for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", srv->data_dir, dirs[i]);
    if (mastra__mkdirs(path, 0700, NULL) < 0) {
      snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
      return -1;
    }
  }
  snprintf(path, sizeof path, "%s/buckets", srv->data_dir);
  srv->buckets = mp_bucket_open(path, err, errlen);
  if (srv->buckets == NULL) return -1;
  srv->loop = mastra__loop_new();
  if (srv->loop == NULL) {
    snprintf(err, errlen, "cannot create the event loop");
    mp_bucket_close(srv->buckets);
    srv->buckets = NULL;
    return -1;
  }
  if (mp_state_load(srv) < 0) {
    snprintf(err, errlen, "cannot read %s/state/sandboxes", srv->data_dir);
    mp_server_close(srv);
    return -1;
  }
  return 0;
}

void mp_server_close(mp_server *srv) {
  if (srv->loop != NULL) {
    mp_trash_stop(srv);
    mastra__loop_close(srv->loop); /* kills and reaps what is left */
    mp_template_free_all(srv);
    mp_sandbox_free_all(srv);
    mp_lease_free_all(srv);
    if (srv->driver != NULL && srv->driver->stop != NULL)
      srv->driver->stop(srv); /* its watchers, while the loop is there */
    mastra__loop_unref(srv->loop);
    srv->loop = NULL;
  }
  if (srv->buckets != NULL) mp_bucket_close(srv->buckets);
  srv->buckets = NULL;
}
