//! The wire: exact error texts, malformed and oversized requests, inline commands, pipelining.

mod server_common;

use server_common::{TestServer, encode};
use std::time::Duration;

#[test]
fn unknown_commands_and_wrong_arity_get_redis_texts() {
    let server = TestServer::start();
    let mut c = server.raw();
    assert_eq!(c.cmd(&[b"foo", b"a", b"b"]), "-ERR unknown command 'foo', with args beginning with: 'a' 'b' ");
    assert_eq!(c.cmd(&[b"FOO"]), "-ERR unknown command 'FOO', with args beginning with: ");
    assert_eq!(c.cmd(&[b"get"]), "-ERR wrong number of arguments for 'get' command");
    assert_eq!(c.cmd(&[b"GET", b"a", b"b"]), "-ERR wrong number of arguments for 'get' command");
    assert_eq!(c.cmd(&[b"set", b"k"]), "-ERR wrong number of arguments for 'set' command");
    assert_eq!(c.cmd(&[b"mset", b"a", b"1", b"b"]), "-ERR wrong number of arguments for 'mset' command");
    assert_eq!(c.cmd(&[b"config", b"nope"]), "-ERR unknown subcommand 'nope'. Try CONFIG HELP.");
    // The connection survives command errors.
    assert_eq!(c.cmd(&[b"PING"]), "+PONG");
}

#[test]
fn malformed_requests_get_a_protocol_error_and_the_connection_closes() {
    let server = TestServer::start();
    let cases: [(&[u8], &str); 6] = [
        (b"*1\r\n:1\r\n", "-ERR Protocol error: expected '$', got ':'"),
        (b"*1\r\n$x\r\n", "-ERR Protocol error: invalid bulk length"),
        (b"*-2x\r\n", "-ERR Protocol error: invalid multibulk length"),
        (b"*1\r\n$3\r\nGETxx", "-ERR Protocol error: bulk string not terminated by CRLF"),
        (b"GET \"unbalanced\r\n", "-ERR Protocol error: unbalanced quotes in request"),
        (b"*1\r\n$-3\r\n", "-ERR Protocol error: invalid bulk length"),
    ];
    for (wire, expected) in cases {
        let mut c = server.raw();
        c.send(wire);
        assert_eq!(c.reply().as_deref(), Some(expected), "{:?}", String::from_utf8_lossy(wire));
        assert!(c.closed(), "connection stays open after {:?}", String::from_utf8_lossy(wire));
    }
}

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

#[test]
fn oversized_lengths_are_refused_without_allocating_them() {
    let server = TestServer::start();
    let before = resident_bytes();
    for claim in [&b"*1\r\n$999999999999\r\n"[..], b"*2\r\n$3\r\nGET\r\n$1073741824\r\n", b"*99999999999\r\n"] {
        let mut c = server.raw();
        c.send(claim);
        let reply = c.reply().unwrap_or_default();
        assert!(
            reply == "-ERR Protocol error: invalid bulk length"
                || reply == "-ERR Protocol error: invalid multibulk length",
            "{reply}"
        );
        assert!(c.closed());
    }
    // A claim just under the limit is accepted but only grows with the bytes that arrive.
    let mut c = server.raw();
    c.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$16000000\r\nonly-a-few-bytes");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let grown = resident_bytes().saturating_sub(before);
    assert!(grown < 64 << 20, "resident memory grew by {grown} bytes");
    // Headers without an end are bounded too.
    let mut c = server.raw();
    let mut endless = b"*1\r\n$".to_vec();
    endless.extend(std::iter::repeat_n(b'9', 100 << 10));
    c.send(&endless);
    assert_eq!(c.reply().as_deref(), Some("-ERR Protocol error: too big bulk count string"));
}

#[test]
fn large_values_round_trip() {
    let server = TestServer::start();
    let mut c = server.raw();
    let value: Vec<u8> = (0..(1 << 20)).map(|i| (i % 251) as u8).collect();
    assert_eq!(c.cmd(&[b"SET", b"big", &value]), "+OK");
    c.send(&encode(&[b"STRLEN", b"big"]));
    assert_eq!(c.reply().as_deref(), Some(":1048576"));
    let mut redis = server.client();
    let got: Vec<u8> = redis::cmd("GET").arg("big").query(&mut redis).unwrap();
    assert_eq!(got, value);
}

#[test]
fn inline_commands_work() {
    let server = TestServer::start();
    let mut c = server.raw();
    c.send(b"PING\r\nSET greeting \"hello world\"\r\n\r\nGET greeting\r\necho 'a b'\n");
    let replies: Vec<String> = (0..4).map(|_| c.reply().unwrap()).collect();
    assert_eq!(replies, ["+PONG", "+OK", "hello world", "a b"]);
}

#[test]
fn a_thousand_pipelined_commands_get_a_thousand_replies_in_order() {
    let server = TestServer::start();
    let mut c = server.raw();
    let mut wire = Vec::new();
    for i in 0..1000 {
        let (key, value) = (format!("p{i}"), format!("v{i}"));
        if i % 2 == 0 {
            wire.extend(encode(&[b"SET", key.as_bytes(), value.as_bytes()]));
        } else {
            wire.extend(encode(&[b"INCR", b"counter"]));
        }
    }
    c.send(&wire);
    for i in 0..1000 {
        let expected = if i % 2 == 0 { "+OK".to_string() } else { format!(":{}", i / 2 + 1) };
        assert_eq!(c.reply().unwrap(), expected, "reply {i}");
    }
    let mut wire = Vec::new();
    for i in (0..1000).step_by(2) {
        wire.extend(encode(&[b"GET", format!("p{i}").as_bytes()]));
    }
    c.send(&wire);
    for i in (0..1000).step_by(2) {
        assert_eq!(c.reply().unwrap(), format!("v{i}"));
    }
}

#[test]
fn quit_replies_then_closes() {
    let server = TestServer::start();
    let mut c = server.raw();
    assert_eq!(c.cmd(&[b"QUIT"]), "+OK");
    assert!(c.closed());
}

#[test]
fn a_client_that_does_not_read_its_replies_does_not_stall_the_others() {
    // One event loop: while `hog`'s replies fill its socket, the loop must go on serving `other`.
    let server = TestServer::with_loops(lazarus::DatabaseConfig::default(), 1);
    let mut hog = server.raw();
    let value: Vec<u8> = (0..(1 << 20)).map(|i| (i % 253) as u8).collect();
    assert_eq!(hog.cmd(&[b"SET", b"big", &value]), "+OK");
    const GETS: usize = 64;
    let mut wire = Vec::new();
    for _ in 0..GETS {
        wire.extend(encode(&[b"GET", b"big"]));
    }
    hog.send(&wire); // 64 MiB of replies, far more than the socket buffers hold
    std::thread::sleep(Duration::from_millis(200));
    let mut other = server.raw();
    other.set_read_timeout(Duration::from_secs(10));
    assert_eq!(other.cmd(&[b"SET", b"small", b"1"]), "+OK", "a blocked writer stalled the loop");
    assert_eq!(other.cmd(&[b"GET", b"small"]), "1");
    let expected = String::from_utf8_lossy(&value).into_owned();
    for i in 0..GETS {
        assert!(hog.reply().as_deref() == Some(expected.as_str()), "reply {i} of the unread pipeline differs");
    }
}

#[test]
fn many_pipelining_connections_on_one_loop_each_get_their_own_replies_in_order() {
    let server = TestServer::with_loops(lazarus::DatabaseConfig::default(), 1);
    let addr = server.addr;
    let clients: Vec<_> = (0..48)
        .map(|c| {
            std::thread::spawn(move || {
                let mut conn = server_common::RawConn::connect(addr);
                for round in 0..20 {
                    let mut wire = Vec::new();
                    for i in 0..50 {
                        let key = format!("c{c}:{i}");
                        wire.extend(encode(&[b"SET", key.as_bytes(), format!("{round}").as_bytes()]));
                        wire.extend(encode(&[b"GET", key.as_bytes()]));
                    }
                    conn.send(&wire);
                    for i in 0..50 {
                        assert_eq!(conn.reply().as_deref(), Some("+OK"), "client {c} round {round} SET {i}");
                        assert_eq!(conn.reply(), Some(format!("{round}")), "client {c} round {round} GET {i}");
                    }
                }
            })
        })
        .collect();
    for client in clients {
        client.join().expect("a client's replies were wrong");
    }
    let mut c = server.raw();
    assert_eq!(c.cmd(&[b"DBSIZE"]), ":2400");
}
