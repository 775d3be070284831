/* allockit's version, written here only: CMake reads it from this file. Valid C and C++. */
#ifndef ALLOCKIT_VERSION_H
#define ALLOCKIT_VERSION_H

#define AK_VERSION_MAJOR 0
#define AK_VERSION_MINOR 2
#define AK_VERSION_PATCH 0
#define AK_VERSION_STRING "0.2.0"
/* One number that orders versions: MAJOR * 10000 + MINOR * 100 + PATCH. ak_version() returns
   the number of the library actually linked or preloaded, which may differ from the header's. */
#define AK_VERSION (AK_VERSION_MAJOR * 10000 + AK_VERSION_MINOR * 100 + AK_VERSION_PATCH)

#endif /* ALLOCKIT_VERSION_H */
