//! HTTP/1.1 on the wire for the admin endpoint tests: one request per
//! connection, the answer read until the server closes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One answer: status code, headers (lower-case names), body.
pub struct Answer {
    pub code: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Send `request` as is and read the answer until the server closes.
pub fn exchange(addr: &str, request: &[u8]) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP answer: {text:?}"));
    let mut lines = head.lines();
    let code = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {head}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer {
        code,
        headers,
        body: body.to_string(),
    }
}

pub fn request(addr: &str, method: &str, path: &str) -> Answer {
    exchange(
        addr,
        format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
}

pub fn error_of(a: &Answer) -> String {
    let v: serde_json::Value =
        serde_json::from_str(&a.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", a.body));
    v["error"].as_str().unwrap_or_default().to_string()
}
