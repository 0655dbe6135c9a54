#ifndef CMPV_SHIM_H
#define CMPV_SHIM_H
#include <mpv/client.h>
#endif
