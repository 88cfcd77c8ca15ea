#include "ampt/low/thing.h"
#include "ampt/core/errors.h"
