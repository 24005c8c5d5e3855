//! The HTTP/1.1 that webd speaks: request heads parsed, answers chosen, the body pattern.
//!
//! Pure functions over bytes, so the host's `cargo test` checks them without a socket.

/// The longest request head webd reads; a longer one is answered 431 and the connection ends.
pub const MAX_HEAD: usize = 16 * 1024;

/// The largest body `GET /kib/N` and `GET /mib/N` answer (1 GiB), and the largest upload
/// `POST /sink` takes (4 GiB): a bound on what one request can make a worker do.
pub const MAX_BODY: u64 = 1 << 30;
pub const MAX_UPLOAD: u64 = 4 << 30;

/// One line of the body pattern: every body is this line repeated, cut at its length, so a
/// client can check any byte by its offset alone (`PATTERN[offset % 64]`).
pub const PATTERN: &[u8; 64] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-\n";

/// The byte at `offset` of every body.
pub fn pattern_byte(offset: u64) -> u8 {
    PATTERN[(offset % PATTERN.len() as u64) as usize]
}

/// A request head, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// HTTP/1.1 (true) or HTTP/1.0.
    pub http11: bool,
    /// The connection stays open after the answer: HTTP/1.1 unless `Connection: close`,
    /// HTTP/1.0 only with `Connection: keep-alive` (RFC 9112 §9.3).
    pub keep_alive: bool,
    /// `Content-Length`, 0 when absent.
    pub content_length: u64,
    /// A `Transfer-Encoding` other than `identity` (chunked uploads, which webd refuses).
    pub chunked: bool,
}

/// Why a head is no request webd can answer; each is answered with its status, then the
/// connection ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadRequest {
    /// Not `METHOD TARGET HTTP/1.x`, or a header line without a colon, or a Content-Length
    /// that is no number: 400.
    Malformed,
    /// A version other than HTTP/1.0 and 1.1: 505.
    Version,
}

impl BadRequest {
    pub fn status(self) -> (u16, &'static str) {
        match self {
            Self::Malformed => (400, "Bad Request"),
            Self::Version => (505, "HTTP Version Not Supported"),
        }
    }
}

/// Where the head ends in `bytes` (the index just past `\r\n\r\n`), if it has.
pub fn head_end(bytes: &[u8]) -> Option<usize> {
    bytes.windows(4).position(|window| window == b"\r\n\r\n").map(|at| at + 4)
}

/// Decodes a request head (up to and including its blank line).
pub fn parse_head(head: &[u8]) -> Result<Request, BadRequest> {
    let text = std::str::from_utf8(head).map_err(|_| BadRequest::Malformed)?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let words: Vec<&str> = request_line.split(' ').collect();
    let [method, target, version] = words[..] else { return Err(BadRequest::Malformed) };
    if method.is_empty() || !target.starts_with('/') {
        return Err(BadRequest::Malformed);
    }
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        other if other.starts_with("HTTP/") => return Err(BadRequest::Version),
        _ => return Err(BadRequest::Malformed),
    };
    let mut request = Request {
        method: method.to_string(),
        path: target.split('?').next().unwrap_or(target).to_string(),
        http11,
        keep_alive: http11,
        content_length: 0,
        chunked: false,
    };
    for line in lines.take_while(|line| !line.is_empty()) {
        let (name, value) = line.split_once(':').ok_or(BadRequest::Malformed)?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            request.content_length = value.parse().map_err(|_| BadRequest::Malformed)?;
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            request.chunked = !value.eq_ignore_ascii_case("identity");
        } else if name.eq_ignore_ascii_case("connection") {
            for option in value.split(',').map(str::trim) {
                if option.eq_ignore_ascii_case("close") {
                    request.keep_alive = false;
                } else if option.eq_ignore_ascii_case("keep-alive") {
                    request.keep_alive = true;
                }
            }
        }
    }
    Ok(request)
}

/// What a request is answered with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// 200 with `length` bytes of the pattern.
    Pattern { length: u64 },
    /// Read and drop the request's body (`POST /sink`), then 200 with its byte count.
    Sink { length: u64 },
    /// Any other status, with a one-line text body; `close`: end the connection after it.
    Status { status: u16, reason: &'static str, text: &'static str, close: bool },
}

/// The answer to `request`; `default_body` is what `GET /` serves (`--body-size`).
pub fn answer(request: &Request, default_body: u64) -> Answer {
    let status = |status, reason, text| Answer::Status { status, reason, text, close: false };
    if request.chunked {
        // The body's end is unknown without decoding chunks: refuse and end the connection.
        return Answer::Status {
            status: 501,
            reason: "Not Implemented",
            text: "chunked request bodies are not taken\n",
            close: true,
        };
    }
    let sized = |prefix: &str, unit: u64| -> Option<Option<u64>> {
        let number = request.path.strip_prefix(prefix)?;
        Some(number.parse::<u64>().ok().and_then(|n| n.checked_mul(unit)).filter(|&n| n <= MAX_BODY))
    };
    match request.method.as_str() {
        "GET" => {
            if request.path == "/" {
                return Answer::Pattern { length: default_body };
            }
            match sized("/kib/", 1024).or_else(|| sized("/mib/", 1 << 20)) {
                Some(Some(length)) => Answer::Pattern { length },
                Some(None) => status(400, "Bad Request", "write /kib/N or /mib/N, at most 1 GiB\n"),
                None => status(404, "Not Found", "webd serves /, /kib/N, /mib/N and POST /sink\n"),
            }
        }
        "POST" if request.path == "/sink" => {
            if request.content_length > MAX_UPLOAD {
                Answer::Status { status: 413, reason: "Content Too Large", text: "at most 4 GiB\n", close: true }
            } else {
                Answer::Sink { length: request.content_length }
            }
        }
        "POST" => status(404, "Not Found", "webd takes POST at /sink only\n"),
        _ => status(405, "Method Not Allowed", "webd answers GET and POST\n"),
    }
}

/// The head of an answer with a body of `length` bytes; `keep_alive` says whether the
/// connection stays open (HTTP/1.0 clients are told so when it does).
pub fn response_head(http11: bool, status: u16, reason: &str, length: u64, keep_alive: bool) -> Vec<u8> {
    let version = if http11 { "HTTP/1.1" } else { "HTTP/1.0" };
    let connection = match (keep_alive, http11) {
        (false, _) => "Connection: close\r\n",
        (true, false) => "Connection: keep-alive\r\n",
        (true, true) => "",
    };
    format!("{version} {status} {reason}\r\nServer: webd\r\nContent-Length: {length}\r\n{connection}\r\n").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(text: &str) -> Result<Request, BadRequest> {
        let bytes = text.as_bytes();
        parse_head(&bytes[..head_end(bytes).expect("a whole head")])
    }

    #[test]
    fn keep_alive_follows_the_version_and_the_connection_header() {
        let r = request("GET /kib/1 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert!(r.http11 && r.keep_alive);
        assert_eq!(r.path, "/kib/1");
        assert!(!request("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").unwrap().keep_alive);
        assert!(!request("GET / HTTP/1.1\r\nconnection: Keep-Alive, Close\r\n\r\n").unwrap().keep_alive);
        assert!(!request("GET / HTTP/1.0\r\n\r\n").unwrap().keep_alive);
        assert!(request("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").unwrap().keep_alive);
    }

    #[test]
    fn bad_heads_are_named() {
        assert_eq!(request("hello\r\n\r\n"), Err(BadRequest::Malformed));
        assert_eq!(request("GET / HTTP/2.0\r\n\r\n"), Err(BadRequest::Version));
        assert_eq!(request("GET noslash HTTP/1.1\r\n\r\n"), Err(BadRequest::Malformed));
        assert_eq!(request("GET / HTTP/1.1\r\nno colon\r\n\r\n"), Err(BadRequest::Malformed));
        assert_eq!(request("POST /sink HTTP/1.1\r\nContent-Length: many\r\n\r\n"), Err(BadRequest::Malformed));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
    }

    #[test]
    fn answers() {
        let get = |path: &str| answer(&request(&format!("GET {path} HTTP/1.1\r\n\r\n")).unwrap(), 1024);
        assert_eq!(get("/"), Answer::Pattern { length: 1024 });
        assert_eq!(get("/kib/3"), Answer::Pattern { length: 3072 });
        assert_eq!(get("/mib/64?x=1"), Answer::Pattern { length: 64 << 20 });
        assert_eq!(get("/mib/1024"), Answer::Pattern { length: 1 << 30 });
        assert!(matches!(get("/mib/1025"), Answer::Status { status: 400, .. }));
        assert!(matches!(get("/kib/x"), Answer::Status { status: 400, .. }));
        assert!(matches!(get("/index.html"), Answer::Status { status: 404, close: false, .. }));
        let sink = request("POST /sink HTTP/1.1\r\nContent-Length: 5\r\n\r\n").unwrap();
        assert_eq!(answer(&sink, 0), Answer::Sink { length: 5 });
        let chunked = request("POST /sink HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap();
        assert!(matches!(answer(&chunked, 0), Answer::Status { status: 501, close: true, .. }));
        let put = request("PUT /sink HTTP/1.1\r\n\r\n").unwrap();
        assert!(matches!(answer(&put, 0), Answer::Status { status: 405, .. }));
    }

    #[test]
    fn heads_say_the_length_and_the_connection() {
        let head = String::from_utf8(response_head(true, 200, "OK", 1024, true)).unwrap();
        assert_eq!(head, "HTTP/1.1 200 OK\r\nServer: webd\r\nContent-Length: 1024\r\n\r\n");
        let head = String::from_utf8(response_head(false, 200, "OK", 0, true)).unwrap();
        assert!(head.starts_with("HTTP/1.0 200 OK\r\n") && head.contains("Connection: keep-alive\r\n"));
        assert!(String::from_utf8(response_head(true, 404, "Not Found", 3, false))
            .unwrap()
            .contains("Connection: close"));
    }

    #[test]
    fn the_pattern_repeats_every_64_bytes() {
        assert_eq!(pattern_byte(0), b'0');
        assert_eq!(pattern_byte(63), b'\n');
        assert_eq!(pattern_byte(64 * 1000 + 10), b'a');
    }
}
