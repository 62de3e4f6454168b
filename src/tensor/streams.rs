//! Tensors and CUDA streams: c10's `Tensor::record_stream`, and the
//! producer's side of the DLPack stream handshake.

use super::TensorImpl;
use crate::device::DeviceType;
use crate::error::Result;

impl TensorImpl {
    /// Records that `stream` uses this tensor's memory (c10's
    /// `record_stream`): when the storage's memory is freed, the caching
    /// CUDA allocator reuses it only after the work queued on `stream` by
    /// then is done. Memory of any other allocator needs nothing (as in
    /// c10). Errors: not a CUDA tensor (Device).
    pub fn record_stream(&self, stream: usize) -> Result<()> {
        self.storage().record_stream(stream)
    }

    /// Readies a DLPack export for a consumer that will use it on
    /// `stream`, numbered as DLPack's `__dlpack__(stream=...)`: -1 asks for
    /// no synchronization; for a CUDA tensor, 1 is the legacy default
    /// stream, 2 the per-thread default stream, and other values are
    /// stream handles. The consumer's stream waits for the work queued so
    /// far on the thread's current stream (an event), and is recorded as a
    /// user of the memory, so the memory is not reused before the
    /// consumer's work queued by the time of its release is done.
    pub fn hand_to_stream(&self, stream: isize) -> Result<()> {
        if stream == -1 {
            return Ok(());
        }
        let device = self.device();
        crate::ensure!(
            device.device_type == DeviceType::Cuda,
            InvalidArgument,
            "stream {stream} for a tensor on {device}: expected -1 (DLPack passes no stream for \
             this device)"
        );
        crate::ensure!(
            stream > 0,
            InvalidArgument,
            "stream {stream} is not a CUDA stream: expected -1 (no synchronization), 1 (the \
             legacy default stream), 2 (the per-thread default stream) or a stream handle \
             (DLPack disallows 0 for CUDA: it is ambiguous)"
        );
        wait_and_record(self, stream as usize)
    }
}

#[cfg(feature = "cuda")]
fn wait_and_record(t: &TensorImpl, stream: usize) -> Result<()> {
    crate::allocator::cuda::stream_wait(i32::from(t.device().index), stream)?;
    t.record_stream(stream)
}

#[cfg(not(feature = "cuda"))]
fn wait_and_record(_t: &TensorImpl, _stream: usize) -> Result<()> {
    crate::bail!(Unsupported, "tessera was built without the cuda feature")
}
