/* The environment a benchmark's child runs in: this process's, without LD_PRELOAD, then
 * LD_PRELOAD=preload unless preload is "-" (the system malloc). Shared by the launchers
 * (start/spawn_loop.c, programs/measure.c). Returns NULL when out of memory. */
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char** environ;

static char** preload_env(const char* preload) {
  size_t n = 0;
  while (environ[n]) ++n;
  char** env = calloc(n + 2, sizeof(char*));
  if (env == NULL) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; ++i)
    if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0) env[k++] = environ[i];
  if (strcmp(preload, "-") != 0) {
    char* e = malloc(strlen(preload) + 12);
    if (e == NULL) return NULL;
    sprintf(e, "LD_PRELOAD=%s", preload);
    env[k++] = e;
  }
  env[k] = NULL;
  return env;
}
