// tests/store/store_files.h: a store's mapped files opened without a Store
// around them, and nodes and writer entries written into them by hand, for
// the direct tests of the store's collaborators (WriterTable, ChainLocks,
// Placer) that StoreImpl composes.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "common/temp_dir.h"
#include "frs/store.h"
#include "os/shm_lock.h"
#include "store/chain_map.h"
#include "store/format.h"
#include "store/nodes.h"
#include "store/store_file.h"

namespace frs::testing {

// The files of a new store in a temp dir, as StoreImpl receives them. With
// chains of 64 slots every key-node is a group of its own (frs/store.h
// KeynodeGroup), so the key-nodes the tests name are the groups the files
// are laid out, locked and journaled in.
struct StoreFiles {
  StoreFiles(uint32_t n, uint32_t keynodes, uint32_t chain) {
    opts.dir = dir.path();
    opts.geometry = {n, keynodes, chain};
    geo = store::GroupGeometry(opts.geometry);
    for (uint32_t i = 0; i < n; ++i) {
      auto f = store::StoreFile::Open(dir.path(), i, opts.geometry, /*create=*/true, /*store_id=*/42,
                                      store::PlaceKey{});  // unkeyed: a store of format 5
      EXPECT_TRUE(f.ok()) << f.status().ToString();
      files.push_back(std::move(f.value()));
    }
  }
  store::StoreFile* file(uint32_t i) const { return files[i].get(); }

  TempDir dir;
  StoreOptions opts;
  StoreGeometry geo;  // the group geometry the files are laid out in
  std::vector<std::unique_ptr<store::StoreFile>> files;
};

// This thread's identity with another start time: certainly dead to
// os::OwnerAlive (as the owner of a reused pid is), and named by this pid.
inline os::Owner DeadOwner() {
  os::Owner o = os::Self();
  o.start += 1;
  return o;
}

// A one-slot (compact) node of identity `id` at (keynode, slot), tagged and
// checked as the store writes one: intact to ExtentAt.
inline store::NodeHeader* PutNode(store::StoreFile* f, uint32_t keynode, uint32_t slot, uint64_t id, uint16_t biz,
                                  uint32_t last_access_s, uint32_t expire_s = 0) {
  uint8_t* p = f->slot(keynode, slot);
  std::memset(p, 0, kSlotBytes);
  store::NodeHeader* h = store::HeaderAt(p);
  h->id = id;
  h->biz = biz;
  h->form = 1 | store::kFormCompact;
  h->heat_kind = 1;  // heat 1, KeyForm::kHashed
  h->last_access_s = last_access_s;
  h->expire_s = expire_s;
  store::SetTags_locked(f, keynode, slot, 1, store::TagOf(store::PlaceHashOf(h)));
  return h;
}

// A writer entry owned by `owner` with one open journal record: the image
// of (keynode, slot) as it is now, as a writer saves it before a write.
inline void OpenEntryWithImage(store::StoreFile* f, uint32_t entry, os::Owner owner, uint32_t keynode, uint32_t slot) {
  store::WriterEntryHeader* w = f->writer(entry);
  std::memset(w, 0, sizeof(*w));
  w->owner = owner.word();
  store::JournalRecord* r = f->records(w);
  r->keynode = keynode;
  r->slot = slot;
  std::memcpy(r->image, f->slot(keynode, slot), kSlotBytes);
  w->count = 1;
  w->active = 1;
}

}  // namespace frs::testing
