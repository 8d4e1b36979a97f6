/* A side edge: a and b share a rank, so neither may include the other. */
#include "mid.h"
#include "other.h"
