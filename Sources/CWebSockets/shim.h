#ifndef CWEBSOCKETS_SHIM_H
#define CWEBSOCKETS_SHIM_H
#include <libwebsockets.h>

/* LWS_PRE is a computed macro Swift cannot import: the bytes lws_write needs before a payload. */
static inline size_t CWebSockets_pre(void) { return LWS_PRE; }

/* CONTEXT_PORT_NO_LISTEN is a macro of a negative int: a client-only context. */
static inline int CWebSockets_no_listen(void) { return CONTEXT_PORT_NO_LISTEN; }

/* The handshake's extra headers: `in` of LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER is an
   `unsigned char **` cursor with `len` bytes of room behind it. Returns 0 when it fit. */
static inline int CWebSockets_append_header(struct lws *wsi, void *in, size_t len, const char *name, const char *value) {
    unsigned char **p = (unsigned char **)in;
    unsigned char *end = (*p) + len;
    return lws_add_http_header_by_name(wsi, (const unsigned char *)name, (const unsigned char *)value, (int)strlen(value), p, end);
}
#endif
