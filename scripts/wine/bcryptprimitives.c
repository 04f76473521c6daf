/*
 * bcryptprimitives.dll for Wine 8 (Debian 12), which has none: Bun's Windows runtime imports
 * ProcessPrng from it, as Windows 10 and later provide. Microsoft documents ProcessPrng as
 * filling the buffer with random bytes and always returning TRUE; the bytes come from
 * advapi32's RtlGenRandom, exported as SystemFunction036, which takes at most a ULONG at once.
 * A test tool for the Windows suite under Wine, never shipped.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T size) {
    const SIZE_T most = 0x40000000;
    for (SIZE_T done = 0; done < size;) {
        ULONG part = (ULONG)(size - done < most ? size - done : most);
        if (!SystemFunction036(data + done, part)) return FALSE;
        done += part;
    }
    return TRUE;
}
