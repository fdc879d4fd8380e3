/*
 * Deliberately wrong: src/core may not include a header of src/net
 * (docs/design.md §1: data flows one way). Built with core's include
 * directories, this must fail; ctest registers its build with WILL_FAIL.
 */
#include "airetry.h"
#include "exchange.h"

int air__layering_wrong_way(void);
int air__layering_wrong_way(void) {
  return 0;
}
