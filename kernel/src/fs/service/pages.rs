//! Where tmpfs files and pipes keep their bytes: frames of the service's instance, held
//! through the memory manager's `HeldFrames` (which alone touches them raw).

use crate::mm::held_frames::HeldFrames;
use vfs::{PageHandle, PageStore, PAGE_SIZE};

/// Frames of this instance as tmpfs and pipe pages; a page's handle is its frame's address.
pub(super) struct FramePages {
    frames: HeldFrames,
}

impl FramePages {
    pub(super) fn new() -> Self {
        Self { frames: HeldFrames::new() }
    }
}

impl PageStore for FramePages {
    fn allocate(&mut self) -> Option<PageHandle> {
        self.frames.allocate_zeroed().ok().map(PageHandle)
    }

    fn free(&mut self, page: PageHandle) {
        let _ = self.frames.free(page.0);
    }

    fn bytes(&self, page: PageHandle) -> &[u8; PAGE_SIZE] {
        self.frames.bytes(page.0)
    }

    fn bytes_mut(&mut self, page: PageHandle) -> &mut [u8; PAGE_SIZE] {
        self.frames.bytes_mut(page.0)
    }
}
