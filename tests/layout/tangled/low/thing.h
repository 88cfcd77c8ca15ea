#include "ampt/high/thing.h"
