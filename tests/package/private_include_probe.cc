// Compiled by Tools.PrivateIncludeDoesNotCompile with frsctl's include
// directories: the public header is found, the private one must not be.
#include "frs/store.h"
#include "os/store_dir.h"
