/*
** The inspector's page (the files of src/server/inspector/page/), embedded
** in the binary: CMake turns each file into a byte array of
** inspector_assets.c in the build tree (cmake/embed_assets.cmake).
*/
#ifndef MP_INSPECTOR_ASSETS_H
#define MP_INSPECTOR_ASSETS_H

#include <stddef.h>

typedef struct mp_asset {
  const char *name;          /* the file name: index.html, inspector.js ... */
  const unsigned char *data;
  size_t len;
} mp_asset;

extern const mp_asset mp_inspector_assets[];
extern const size_t mp_inspector_nassets;

#endif
