/* The middle layer's header includes the bottom's: a forward edge. */
#include "low.h"
