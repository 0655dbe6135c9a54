#ifndef CFUSE3_SHIM_H
#define CFUSE3_SHIM_H
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <sys/xattr.h>
#endif
