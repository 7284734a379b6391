/* File times on the episode's clock for Node.js (the filesystem server), preloaded into the
 * server alone (servers.json: LD_PRELOAD).
 *
 * The sandbox's clock (sandboxes/clock.py) is libfaketime, preloaded into every process: it
 * shifts the wall clock and the times stat(), lstat(), fstat() and statx() return. Node.js
 * reads file times through libuv, which asks the kernel with syscall(SYS_statx, ...) (a
 * system call libfaketime never sees) and, where statx is refused, with stat64(), lstat64()
 * and fstat64() (entry points libfaketime does not wrap). So get_file_info showed the real
 * collection date as "created" and seeded times moved by the clock's offset.
 *
 * This library hands those calls to libfaketime's wrappers, found by name in the process (it
 * defines none of them itself): the shift, its offset and its rules stay libfaketime's. On
 * x86-64 struct stat64 and struct stat are the same structure. Without the clock (no
 * libfaketime loaded) the names find glibc's own functions: nothing is shifted, as everywhere
 * else in the sandbox.
 *
 * Only the server gets it: wrapping stat64 in every process made Python recompile every
 * module on start (its byte-code caches compare stat64 times with the times written in them;
 * docs/determinism.md).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/syscall.h>

typedef int (*stat_path_fn)(const char *, struct stat *);
typedef int (*stat_fd_fn)(int, struct stat *);
typedef int (*statx_fn)(int, const char *, int, unsigned int, struct statx *);
typedef long (*syscall_fn)(long, ...);

_Static_assert(sizeof(struct stat64) == sizeof(struct stat), "stat64 is not stat here");

static stat_path_fn shifted_stat, shifted_lstat;
static stat_fd_fn shifted_fstat;
static statx_fn shifted_statx;
static syscall_fn real_syscall;

/* Every preloaded library is loaded before any constructor runs: libfaketime's wrappers are
 * there to be found (RTLD_DEFAULT: the first definition in the process, libfaketime's when it
 * is loaded). */
__attribute__((constructor)) static void find_wrappers(void) {
  shifted_stat = (stat_path_fn)dlsym(RTLD_DEFAULT, "stat");
  shifted_lstat = (stat_path_fn)dlsym(RTLD_DEFAULT, "lstat");
  shifted_fstat = (stat_fd_fn)dlsym(RTLD_DEFAULT, "fstat");
  shifted_statx = (statx_fn)dlsym(RTLD_DEFAULT, "statx");
  real_syscall = (syscall_fn)dlsym(RTLD_NEXT, "syscall");
}

int stat64(const char *path, struct stat64 *buf) {
  return shifted_stat(path, (struct stat *)buf);
}

int lstat64(const char *path, struct stat64 *buf) {
  return shifted_lstat(path, (struct stat *)buf);
}

int fstat64(int fd, struct stat64 *buf) {
  return shifted_fstat(fd, (struct stat *)buf);
}

/* syscall(2) passes up to six word-sized arguments; all of them are forwarded unchanged
 * except for statx, which goes to the statx() wrapper (same return and errno convention). */
long syscall(long number, ...) {
  va_list args;
  va_start(args, number);
  long a = va_arg(args, long), b = va_arg(args, long), c = va_arg(args, long);
  long d = va_arg(args, long), e = va_arg(args, long), f = va_arg(args, long);
  va_end(args);
  if (number == SYS_statx) {
    return shifted_statx((int)a, (const char *)b, (int)c, (unsigned int)d, (struct statx *)e);
  }
  return real_syscall(number, a, b, c, d, e, f);
}
