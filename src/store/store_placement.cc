// frs/store_placement.h over the store's own placement (placement.h), so a
// simulation places keys by the code the store runs.
#include "frs/store_placement.h"

#include "store/identity.h"
#include "store/placement.h"

namespace frs {

KeyPlacement PlacementOf(const StoreGeometry& g, uint16_t biz, std::string_view key, uint64_t k0, uint64_t k1) {
  const store::Identity ident = store::IdentityOfText(key, FingerprintOf(biz, key));
  const store::Location l = store::Locate(store::LocationHash(store::PlaceKey{k0, k1}, biz, ident), g, KeynodeGroup(g));
  return KeyPlacement{l.file, l.a, l.b};
}

int PlacementChoice(const bool fits[2], const uint32_t free_slots[2], int candidates) {
  return store::LessLoaded(fits, free_slots, candidates);
}

}  // namespace frs
