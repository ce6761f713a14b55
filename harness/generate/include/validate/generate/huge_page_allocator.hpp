#pragma once
// Makes LibTorch allocate its CPU tensors with validate::alloc_buffer (core/huge_pages.hpp): 2 MiB
// aligned and advised onto transparent huge pages from 4 MiB up, freed ones kept for reuse (up to
// 2 GiB, an eighth of the memory at most). Once per process; called when the LibTorch device is
// opened, before any reference tensor exists.
namespace validate::generate {

void install_huge_page_allocator();

}  // namespace validate::generate
