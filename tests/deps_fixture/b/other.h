/* b includes a header of a (beside it), but this pair is listed in allowed.txt. */
#include "side_api.h"
