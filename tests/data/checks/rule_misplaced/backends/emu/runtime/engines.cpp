// A fixture for CTest emu.rule_rooms.fires: an mbarrier rule reported by the
// engines' room, as the pre-split world_async.cpp did.
void World::engine_commit(AsyncOp& op, std::uint32_t e) {
  if (id < 0) {
    fail(*current_, "mbarrier.uninitialized", "", "tcgen05.commit arrives on no initialised mbarrier", op.loc);
    return;
  }
  fail(*current_, "async.target-exited", "", "in its own room", op.loc);
}
