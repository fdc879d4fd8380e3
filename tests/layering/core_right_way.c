/*
 * The control of the layering check (CMakeLists.txt, tests/layering): a
 * translation unit built with the include directories of src/core that
 * includes only what core may see. It must build, so that the wrong-way
 * twin failing proves the include rule and not a broken setup.
 */
#include "airetry.h"
#include "engine.h"
#include "policy.h"

int air__layering_right_way(void);
int air__layering_right_way(void) {
  return AIR_REASON__COUNT > 0 ? 0 : 1;
}
