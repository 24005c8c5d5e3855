//! Carrying out a decoded request: each variant goes to the room that serves it.

use super::request::Request;
use super::{Errno, Outcome, Reply, Service};
use alloc::vec::Vec;
use linux_raw_sys::errno;

impl Service {
    /// Carries out `request` of process `pid`; `done` is the progress of a parked request
    /// tried again (0 the first time). An error is the errno the caller gets.
    pub(super) fn invoke(&mut self, pid: u32, request: &Request<'_>, done: u64) -> Result<Outcome, Errno> {
        match request {
            Request::Open { at, flags, mode, path } => self.open_path(pid, *at, *flags, *mode, path, done),
            Request::Read { handle, length, offset, dont_wait } => self.read(*handle, *length, *offset, *dont_wait),
            Request::Write { handle, offset, data, dont_wait } => self.write(*handle, *offset, data, done, *dont_wait),
            Request::Seek { handle, offset, whence } => self.seek(*handle, *offset, *whence),
            Request::Stat { handle } => {
                let metadata = self.stat_handle(*handle)?;
                Ok(Outcome::Done(Reply { bytes: metadata.encode().to_vec(), ..Reply::value(0, 0) }))
            }
            Request::StatPath { at, follow, path } => self.stat_path(pid, *at, *follow, path),
            Request::ReadDirectory { handle, capacity } => self.read_directory(*handle, *capacity),
            Request::MakeDirectory { at, mode, path } => self.make_directory(pid, *at, *mode, path),
            Request::Unlink { at, remove_directory, path } => self.unlink(pid, *at, *remove_directory, path),
            Request::Rename { from, to, working_directory, root, flags, from_path, to_path } => {
                self.rename(pid, (*from, from_path), (*to, to_path), (*working_directory, *root), *flags)
            }
            Request::Link { from, to, working_directory, root, follow, from_path, to_path } => {
                self.link(pid, (*from, from_path), (*to, to_path), (*working_directory, *root), *follow)
            }
            Request::Symlink { at, target, path } => self.symlink(pid, *at, target, path),
            Request::ReadLink { at, path } => self.read_link(pid, *at, path),
            Request::Truncate { handle, size } => self.truncate(*handle, *size),
            Request::SetTimes { target, accessed_ns, modified_ns, explicit } => {
                self.set_times(pid, target, (*accessed_ns, *modified_ns), *explicit)
            }
            Request::ChangeMode { target, mode } => self.change_mode(pid, target, *mode),
            Request::ChangeOwner { target, uid, gid } => self.change_owner(pid, target, *uid, *gid),
            Request::Access { target, mode } => self.access(pid, target, *mode),
            Request::Pipe { flags } => self.make_pipe(*flags),
            Request::MakeNode { at, mode, path } => self.make_node(pid, *at, *mode, path),
            Request::Descriptors { table } => {
                let descriptors: Vec<(u32, Vec<u8>)> =
                    table.iter().filter_map(|&(fd, handle)| Some((fd, self.name_of(handle)?))).collect();
                crate::fs::proc::set_descriptors(pid, descriptors, table.clone());
                Ok(Outcome::Silent)
            }
            Request::Retain { handle } => {
                let file = self.open.get_mut(handle).ok_or(errno::EBADF)?;
                file.references += 1;
                Ok(Outcome::Done(Reply::value(0, 0)))
            }
            Request::Release { handle } => {
                self.release(*handle);
                Ok(Outcome::Silent)
            }
            Request::GetFlags { handle } => self.get_flags(*handle),
            Request::SetFlags { handle, flags } => self.set_flags(*handle, *flags),
            Request::Poll { entries, wait } => self.poll(entries, *wait),
            Request::Control { handle, request, argument } => self.control(*handle, *request, argument),
            Request::PathOf { handle, root } => self.path_of(*handle, *root),
            // The parked request is finished by `submit`, which knows the caller's core.
            Request::Cancel { .. } => Ok(Outcome::Silent),
            Request::FilesystemSpace { device } => self.filesystem_space(*device),
            Request::Lock { handle, operation } => self.lock(*handle, *operation),
            Request::EpollCreate => self.epoll_create(),
            Request::EpollControl { epoll, operation, target, descriptor, events, data } => {
                self.epoll_control(*epoll, *operation, (*target, *descriptor), *events, *data)
            }
            Request::EpollWait { epoll, most, wait } => self.epoll_wait(*epoll, *most, *wait),
            Request::SocketCreate { kind, family } => self.socket_create(pid, *kind, *family),
            Request::SocketPair { kind } => self.socket_pair(pid, *kind),
            Request::SocketBind { handle, at, mode, family, name } => {
                self.socket_bind(pid, *handle, *at, *mode, *family, name)
            }
            Request::SocketListen { handle, backlog } => self.socket_listen(*handle, *backlog),
            Request::SocketConnect { handle, at, family, name } => {
                self.socket_connect(pid, *handle, *at, *family, name, done)
            }
            Request::SocketAccept { handle, flags } => self.socket_accept(*handle, *flags),
            Request::SocketShutdown { handle, how } => self.socket_shutdown(*handle, *how),
            Request::SocketName { handle, peer } => self.socket_name(*handle, *peer),
            Request::SocketOption { handle, level, option, set } => self.socket_option(*handle, *level, *option, *set),
            Request::SocketSendTo { handle, dont_wait, family, data, name } => {
                self.socket_send_to(*handle, *family, name, data, *dont_wait)
            }
            Request::SocketReceiveFrom { handle, length, dont_wait } => {
                self.socket_receive_from(*handle, *length, *dont_wait)
            }
            Request::NetInterfaces => {
                let bytes = self.interfaces().iter().flat_map(abi::net::Interface::encode).collect();
                Ok(Outcome::Done(Reply { bytes, ..Reply::value(0, 0) }))
            }
        }
    }
}
