// libarchive's reading side, for HaulArchive alone (its disk writer is never used: haul writes members itself).
#ifndef HAUL_LIBARCHIVE_SHIM_H
#define HAUL_LIBARCHIVE_SHIM_H
#include <archive.h>
#include <archive_entry.h>
#include <locale.h>

/// A locale whose character set is UTF-8, for the thread that reads an archive (`uselocale`): libarchive converts
/// the names it reads to the locale's character set, and under haul's "C" locale it cannot convert a pax or zip
/// name that is not ASCII. Under this one UTF-8 names pass through unchanged. NULL when glibc has no C.UTF-8.
static inline locale_t haul_utf8_ctype_locale(void) { return newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0); }
#endif
