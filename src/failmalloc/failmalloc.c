/*
 * Copyright 2026 mesa-fork contributors
 * SPDX-License-Identifier: MIT
 *
 * libmesa-fork-failmalloc.so: preloaded (LD_PRELOAD), it makes one host
 * allocation fail on request, so that a test can walk a driver's
 * out-of-host-memory paths one allocation at a time.
 *
 * Nothing fails until the program asks, through two functions it finds
 * with dlsym(RTLD_DEFAULT, ...) (absent when the library is not preloaded):
 *
 *   void mf_failmalloc_arm(unsigned nth, const char *only);
 *      the nth allocation from now (1: the next) made by code of a shared
 *      object whose path contains `only` fails: malloc, calloc, realloc,
 *      aligned_alloc, memalign and posix_memalign return NULL (ENOMEM).
 *      Allocations by other objects (libc itself, the Vulkan loader, a
 *      drm-shim) are neither counted nor failed.
 *   int mf_failmalloc_disarm(void);
 *      stops, and says whether the allocation failed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void *__libc_memalign(size_t align, size_t size);

static atomic_uint countdown; /* 0: off */
static atomic_bool fired;
static char only[256];

void
mf_failmalloc_arm(unsigned nth, const char *object)
{
   strncpy(only, object ? object : "", sizeof(only) - 1);
   atomic_store(&fired, false);
   atomic_store(&countdown, nth);
}

int
mf_failmalloc_disarm(void)
{
   atomic_store(&countdown, 0);
   return atomic_load(&fired);
}

/* Whether the allocation called from `caller` fails. */
static bool
fail(const void *caller)
{
   if (atomic_load(&countdown) == 0)
      return false;

   Dl_info info;
   if (!dladdr(caller, &info) || !info.dli_fname ||
       !strstr(info.dli_fname, only))
      return false;

   unsigned left = atomic_load(&countdown);
   while (left && !atomic_compare_exchange_weak(&countdown, &left, left - 1))
      ;
   if (left != 1)
      return false;

   atomic_store(&fired, true);
   errno = ENOMEM;
   return true;
}

#define CALLER __builtin_return_address(0)

void *
malloc(size_t size)
{
   return fail(CALLER) ? NULL : __libc_malloc(size);
}

void *
calloc(size_t n, size_t size)
{
   return fail(CALLER) ? NULL : __libc_calloc(n, size);
}

void *
realloc(void *p, size_t size)
{
   return fail(CALLER) ? NULL : __libc_realloc(p, size);
}

void *
aligned_alloc(size_t align, size_t size)
{
   return fail(CALLER) ? NULL : __libc_memalign(align, size);
}

void *
memalign(size_t align, size_t size)
{
   return fail(CALLER) ? NULL : __libc_memalign(align, size);
}

int
posix_memalign(void **out, size_t align, size_t size)
{
   if (fail(CALLER))
      return ENOMEM;
   if (align < sizeof(void *) || (align & (align - 1)))
      return EINVAL;
   void *p = __libc_memalign(align, size);
   if (!p)
      return ENOMEM;
   *out = p;
   return 0;
}
