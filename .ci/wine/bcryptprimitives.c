/* A stand-in for Windows' bcryptprimitives.dll, which Debian 12's Wine
 * 8.0 lacks: Rust's standard library (1.78 and later) imports its
 * ProcessPrng for HashMap keys, so no Rust program starts there without
 * it. .ci/windows.sh builds this into the Wine prefix's system32; it is
 * a test fixture, never shipped. ProcessPrng fills the buffer from the
 * system's generator (RtlGenRandom, advapi32's SystemFunction036). */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!SystemFunction036(data, n))
            return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
