//! The two timing scenarios served over stdio's framing (a relay connection, lines both
//! ways): the held call's notification line, its cancellation by a `notifications/cancelled`
//! line or by the connection's end, the late line before the next request's own answer, the
//! fallback's plain result; and the times the pacing check reads (a line starts when the read
//! that brought its first byte returned, and is answered as its answer is written).

#[cfg(test)]
mod stdio_timing {
    use mrtr_gate_probe::embedded;
    use mrtr_gate_probe::scenario::Scenario;
    use mrtr_gate_probe::stdio::Server;
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    use tokio::net::TcpStream;
    use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

    fn named(name: &str) -> Arc<Scenario> {
        Arc::new(
            embedded::scenarios()
                .expect("valid")
                .into_iter()
                .find(|s| s.name == name)
                .expect("embedded"),
        )
    }

    const CALL: &str =
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"transfer"}}"#;
    const CANCEL: &str =
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#;
    const PING: &str = r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#;

    async fn connect(server: &Server) -> (BufReader<OwnedReadHalf>, OwnedWriteHalf) {
        let stream = TcpStream::connect(server.address())
            .await
            .expect("connected");
        let (read, write) = stream.into_split();
        (BufReader::new(read), write)
    }

    async fn line(reader: &mut BufReader<OwnedReadHalf>) -> String {
        let mut line = String::new();
        reader.read_line(&mut line).await.expect("a line");
        line
    }

    async fn write(writer: &mut OwnedWriteHalf, lines: &[&str]) {
        let mut bytes = lines.join("\n");
        bytes.push('\n');
        writer.write_all(bytes.as_bytes()).await.expect("written");
    }

    /// Ends the writing side and returns what is left to read.
    async fn rest(mut reader: BufReader<OwnedReadHalf>, mut writer: OwnedWriteHalf) -> String {
        writer.shutdown().await.expect("half-closed");
        let mut rest = String::new();
        reader.read_to_string(&mut rest).await.expect("read");
        rest
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_line_ends_the_hold_and_the_late_round_precedes_the_next_answer() {
        let server = Server::start(named("mrtr-round-after-cancel"), 1, Duration::from_secs(60))
            .expect("serving");
        let (mut reader, mut writer) = connect(&server).await;
        write(&mut writer, &[CALL]).await;
        let notify = line(&mut reader).await;
        assert!(notify.contains("notifications/message"), "{notify}");
        // The request comes before the cancellation: the reader goes on to the cancel line
        // while the request's answer waits for the hold to settle.
        write(&mut writer, &[PING, CANCEL]).await;
        let late = line(&mut reader).await;
        assert!(
            late.contains(r#""id":7,"#) && late.contains("S-late"),
            "{late}"
        );
        let own = line(&mut reader).await;
        assert_eq!(own.trim(), r#"{"jsonrpc":"2.0","id":8,"result":{}}"#);
        assert_eq!(rest(reader, writer).await, "", "nothing for the held call");
        let (requests, ended, hold) = server.finish(Duration::from_secs(60)).await;
        assert!(ended);
        assert_eq!(requests.len(), 3);
        let hold = hold.expect("held");
        assert_eq!(hold.id, "7");
        assert_eq!(
            (hold.cancelled, hold.late_on, hold.fell_back),
            (Some("notifications/cancelled"), Some(1), false)
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_connection_s_end_cancels_the_hold_and_nothing_lingers() {
        let server = Server::start(
            named("mrtr-round-after-cancel"),
            1,
            Duration::from_secs(600),
        )
        .expect("serving");
        let (mut reader, mut writer) = connect(&server).await;
        write(&mut writer, &[CALL]).await;
        line(&mut reader).await;
        assert_eq!(rest(reader, writer).await, "");
        // Well within the fallback: the held task ended with the connection.
        let (_, ended, hold) = server.finish(Duration::from_secs(60)).await;
        assert!(ended);
        let hold = hold.expect("held");
        assert_eq!((hold.cancelled, hold.late_on), (Some("closed"), None));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_line_naming_another_id_cancels_nothing_and_the_fallback_answers() {
        let server = Server::start(
            named("mrtr-round-after-cancel"),
            1,
            Duration::from_millis(100),
        )
        .expect("serving");
        let (mut reader, mut writer) = connect(&server).await;
        write(
            &mut writer,
            &[
                CALL,
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"7"}}"#,
            ],
        )
        .await;
        line(&mut reader).await;
        let fallback = line(&mut reader).await;
        assert!(
            fallback.contains(r#""id":7,"#) && fallback.contains("fallback"),
            "{fallback}"
        );
        write(&mut writer, &[PING]).await;
        let own = line(&mut reader).await;
        assert!(
            own.contains(r#""id":8,"#) && !own.contains("S-late"),
            "{own}"
        );
        assert_eq!(rest(reader, writer).await, "");
        let (_, ended, hold) = server.finish(Duration::from_secs(60)).await;
        assert!(ended);
        let hold = hold.expect("held");
        assert!(hold.fell_back);
        assert_eq!((hold.cancelled, hold.late_on), (None, None));
    }

    fn poll(id: u32) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"poll"}}}}"#)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_line_started_ahead_of_the_answer_counts_from_its_first_byte() {
        let server = Server::start(named("mrtr-state-only-pacing"), 1, Duration::from_secs(60))
            .expect("serving");
        let (mut reader, mut writer) = connect(&server).await;
        // One write: the first call and the next one's first bytes (naive.py's way).
        let second = poll(2);
        let (head, tail) = second.split_at(20);
        writer
            .write_all(format!("{}\n{head}", poll(1)).as_bytes())
            .await
            .expect("written");
        line(&mut reader).await;
        write(&mut writer, &[tail]).await;
        line(&mut reader).await;
        // A paced retry: written only once the answer was read.
        write(&mut writer, &[&poll(3)]).await;
        line(&mut reader).await;
        let _ = rest(reader, writer).await;
        let (requests, _, _) = server.finish(Duration::from_secs(60)).await;
        let answered = |n: usize| requests[n].answered.expect("answered");
        assert!(
            requests[1].started < answered(0),
            "its first byte came with the line before"
        );
        assert!(
            requests[2].started > answered(1),
            "written after the answer"
        );
        assert!(requests[1].started <= requests[1].at);
    }
}
