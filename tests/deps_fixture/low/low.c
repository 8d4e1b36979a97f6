/* A back edge: a bottom file includes a header of the layer above. */
#include "mid.h"
#include "rlock.h"
