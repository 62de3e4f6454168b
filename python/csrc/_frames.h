/* The Python-frame source of _frames.c, for _handler.c. */
#ifndef TESSERA_NUMPY_FRAMES_H
#define TESSERA_NUMPY_FRAMES_H

#include <stddef.h>

#include "tessera.h"

/* A TsrHostFramesFn: the calling thread's Python stack, innermost first,
 * into `out` (at most `capacity` frames); 0 on a thread without the GIL. */
size_t tsr_numpy_python_frames(void *user, TsrHostFrame *out, size_t capacity);

#endif
