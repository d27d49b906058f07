/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Server-Sent Events on a request: the event queue and its framing, the reader, streams bound to keys. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "http-server.h"

/* Binds a long-lived answer (an SSE stream) to the request's key: when the key is revoked or expires, a
 * stream that has started is cut (sse_cut() with an error event, 401 "unauthorized"), one that has not
 * is answered 401. */
int req_bind_to_key(Request *r);

/* SSE: starts a 200 text/event-stream answer. Events are queued; the connection sleeps while there are
 * none. max_events bounds the queue: past it the stream is dropped (closed). */
int req_start_sse(Request *r, size_t max_events);
/* A plain streamed answer of another content type (chunked, 200), with the same queue, reader and drain
 * callback: sse_send_raw() queues bytes as they are, sse_finish() ends it. Not for sse_cut() or keys. */
int req_start_stream(Request *r, const char *content_type);
int sse_send_raw(SseStream *s, const char *data, size_t size);
int sse_send(SseStream *s, const char *id, const char *event, const char *data, size_t size);
/* The same, not subject to max_events (a bounded batch the caller decided to send at once), but counted. */
int sse_send_unbounded(SseStream *s, const char *id, const char *event, const char *data, size_t size);
int sse_comment(SseStream *s, const char *text);
void sse_finish(SseStream *s);      /* ends the stream once everything queued is sent */
/* Ends the stream at once: queued events the client has not begun to receive are dropped, and the
 * given event is the last. */
void sse_cut(SseStream *s, const char *event, const char *data, size_t size);
bool sse_dropped(SseStream *s);
size_t sse_queued(SseStream *s);
/* Bytes queued and not yet sent; cb runs whenever the client has read the queue down to low_water bytes
 * (a producer that paused itself resumes there). */
size_t sse_buffered(SseStream *s);
void sse_set_drain_callback(SseStream *s, size_t low_water, void (*cb)(void *userdata), void *userdata);
/* Drops the stream at once (the client is gone or does not read): nothing more is sent. */
void sse_drop(SseStream *s);

/* One of the key's MaxStreamsPerKey= streams for the request, which is then bound to the key
 * (req_bind_to_key()). At the limit the request is answered 429 "too_many_streams" and -EBUSY returned. */
int req_stream_acquire(Request *r);

/* For http-server.c: the connection is done (MHD closes its socket next), and the request is freed. */
void sse_detach(SseStream *s);
SseStream *sse_free(SseStream *s);
