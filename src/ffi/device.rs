//! Devices at the ABI.

use super::call::{device_type_arg, guard_value};
use super::error::fail;
use super::types::*;
use std::ffi::c_char;

/// c10's lower-case name of a device type ("cpu", "cuda", "hip", "xpu",
/// "mps", "meta", "privateuseone"), or "unknown" for a number that is not
/// a supported device type (with a last-error message). Static; never NULL.
#[no_mangle]
pub extern "C" fn tsr_device_type_name(device_type: TsrDeviceType) -> *const c_char {
    guard_value("tsr_device_type_name", c"unknown".as_ptr(), || {
        let name: &'static std::ffi::CStr = match device_type_arg(device_type) {
            Ok(t) => match t {
                crate::device::DeviceType::Cpu => c"cpu",
                crate::device::DeviceType::Cuda => c"cuda",
                crate::device::DeviceType::Hip => c"hip",
                crate::device::DeviceType::Xpu => c"xpu",
                crate::device::DeviceType::Mps => c"mps",
                crate::device::DeviceType::Meta => c"meta",
                crate::device::DeviceType::PrivateUse1 => c"privateuseone",
            },
            Err(e) => {
                fail("tsr_device_type_name", &e);
                c"unknown"
            }
        };
        name.as_ptr()
    })
}

/// A device value: `{device_type, index}` (index -1: the current device).
/// No validation; functions taking a device check it.
#[no_mangle]
pub extern "C" fn tsr_device(device_type: TsrDeviceType, index: i8) -> TsrDevice {
    TsrDevice { device_type, index }
}
