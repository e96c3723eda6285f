#include "got_patch.h"

#include <cstdint>
#include <cstring>

#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>
#define EMBER_GOT_PATCH 1
#endif

namespace ember {

#if EMBER_GOT_PATCH
namespace {

#if defined(__x86_64__)
bool IsSlot(unsigned type) {
  return type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT || type == R_X86_64_64;
}
#else
bool IsSlot(unsigned type) {
  return type == R_AARCH64_JUMP_SLOT || type == R_AARCH64_GLOB_DAT || type == R_AARCH64_ABS64;
}
#endif

struct Search {
  const char* object;
  const GotRedirect* redirects;
  size_t n;
  int rewritten = 0;
  bool found = false;
};

struct Tables {
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const ElfW(Rela)* rela[2] = {nullptr, nullptr};
  size_t count[2] = {0, 0};
};

Tables ReadDynamic(const ElfW(Dyn)* dyn) {
  Tables t;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: t.symtab = reinterpret_cast<const ElfW(Sym)*>(d->d_un.d_ptr); break;
      case DT_STRTAB: t.strtab = reinterpret_cast<const char*>(d->d_un.d_ptr); break;
      case DT_JMPREL: t.rela[0] = reinterpret_cast<const ElfW(Rela)*>(d->d_un.d_ptr); break;
      case DT_PLTRELSZ: t.count[0] = d->d_un.d_val / sizeof(ElfW(Rela)); break;
      case DT_RELA: t.rela[1] = reinterpret_cast<const ElfW(Rela)*>(d->d_un.d_ptr); break;
      case DT_RELASZ: t.count[1] = d->d_un.d_val / sizeof(ElfW(Rela)); break;
      default: break;
    }
  }
  return t;
}

// Writes `value` into `slot`, making its page writable first and read-only again afterwards
// when it lies in the object's RELRO range (which the dynamic linker made read-only).
bool WriteSlot(void** slot, void* value, uintptr_t relro_begin, uintptr_t relro_end) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  void* first = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(slot) & ~(page - 1));
  if (mprotect(first, page, PROT_READ | PROT_WRITE) != 0) return false;
  __atomic_store_n(slot, value, __ATOMIC_SEQ_CST);
  const uintptr_t at = reinterpret_cast<uintptr_t>(slot);
  if (at >= relro_begin && at < relro_end) mprotect(first, page, PROT_READ);
  return true;
}

int Visit(dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<Search*>(data);
  if (info->dlpi_name == nullptr || std::strstr(info->dlpi_name, s->object) == nullptr) return 0;
  s->found = true;
  const ElfW(Dyn)* dyn = nullptr;
  uintptr_t relro_begin = 0, relro_end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_DYNAMIC)
      dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + ph.p_vaddr);
    if (ph.p_type == PT_GNU_RELRO) {
      relro_begin = info->dlpi_addr + ph.p_vaddr;
      relro_end = relro_begin + ph.p_memsz;
    }
  }
  if (dyn == nullptr) return 1;
  const Tables t = ReadDynamic(dyn);
  if (t.symtab == nullptr || t.strtab == nullptr) return 1;
  for (int k = 0; k < 2; ++k) {
    for (size_t i = 0; i < t.count[k]; ++i) {
      const ElfW(Rela)& r = t.rela[k][i];
      if (!IsSlot(ELF64_R_TYPE(r.r_info)) || ELF64_R_SYM(r.r_info) == 0 || r.r_addend != 0)
        continue;
      const char* name = t.strtab + t.symtab[ELF64_R_SYM(r.r_info)].st_name;
      for (size_t j = 0; j < s->n; ++j) {
        if (std::strcmp(name, s->redirects[j].symbol) != 0) continue;
        void** slot = reinterpret_cast<void**>(info->dlpi_addr + r.r_offset);
        if (!WriteSlot(slot, s->redirects[j].target, relro_begin, relro_end)) {
          s->rewritten = -1;
          return 1;
        }
        ++s->rewritten;
      }
    }
  }
  return 1;
}

}  // namespace

int RedirectGot(const char* object, const GotRedirect* redirects, size_t n) {
  Search s{object, redirects, n};
  dl_iterate_phdr(Visit, &s);
  return s.rewritten;
}

#else

int RedirectGot(const char*, const GotRedirect*, size_t) { return 0; }

#endif

}  // namespace ember
