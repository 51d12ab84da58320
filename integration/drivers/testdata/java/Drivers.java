// pgjdbc through fenceproxy, run as `java -cp postgresql.jar Drivers.java`.
// Each case fences resource drv/<case> (mark 100): v+1 with token 101, v+1000
// with the stale token 99 that must be refused, v+1 with 101 again on the
// same connection. One JSON line per case on stdout.
//
// With the argument "stream", the stream cases instead (see streamMain).
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

public class Drivers {
    interface Write { void run(int token, int inc) throws SQLException; }
    interface Case { SQLException run() throws SQLException; }

    static String writeSQL(String c, int inc) {
        return "UPDATE fenced SET v = v + " + inc + " WHERE id = '" + c + "'";
    }

    static Connection connect(String options) throws SQLException {
        String url = "jdbc:postgresql://" + System.getenv("FP_HOST") + ":" + System.getenv("FP_PORT") + "/" + System.getenv("FP_DB");
        Properties p = new Properties();
        p.setProperty("user", System.getenv("FP_USER"));
        p.setProperty("sslmode", "disable");
        p.setProperty("prepareThreshold", "1"); // a server-side prepared statement from the first execution
        if (options != null) p.setProperty("options", options);
        return DriverManager.getConnection(url, p);
    }

    static void exec(Connection c, String sql) throws SQLException {
        try (Statement st = c.createStatement()) { st.execute(sql); }
    }

    // token 101, stale 99 (must fail with the driver's error), 101 again
    static SQLException threeWrites(Write w) throws SQLException {
        w.run(101, 1);
        SQLException stale = null;
        try { w.run(99, 1000); } catch (SQLException e) { stale = e; }
        if (stale == null) throw new IllegalStateException("stale write was accepted");
        w.run(101, 1);
        return stale;
    }

    static SQLException set() throws SQLException {
        try (Connection c = connect(null)) {
            exec(c, "SET lock.resource = 'drv/set'");
            return threeWrites((tok, inc) -> { exec(c, "SET lock.fencing_token = " + tok); exec(c, writeSQL("set", inc)); });
        }
    }

    static SQLException comment() throws SQLException {
        try (Connection c = connect(null)) {
            return threeWrites((tok, inc) -> exec(c, "/* fencing_token=" + tok + " resource=drv/comment */ " + writeSQL("comment", inc)));
        }
    }

    static SQLException sqlcommenter() throws SQLException {
        try (Connection c = connect(null)) {
            return threeWrites((tok, inc) -> exec(c, writeSQL("sqlcommenter", inc) + " /*fencing_token='" + tok + "',resource='drv%2Fsqlcommenter'*/"));
        }
    }

    static SQLException options() throws SQLException {
        try (Connection c = connect("-c lock.fencing_token=101 -c lock.resource=drv/options")) {
            exec(c, writeSQL("options", 1));
        }
        try (Connection c = connect("-c lock.fencing_token=99 -c lock.resource=drv/options")) {
            SQLException stale = null;
            try { exec(c, writeSQL("options", 1000)); } catch (SQLException e) { stale = e; }
            if (stale == null) throw new IllegalStateException("stale write was accepted");
            exec(c, "SET lock.fencing_token = 101");
            exec(c, writeSQL("options", 1));
            return stale;
        }
    }

    static SQLException prepared() throws SQLException {
        try (Connection c = connect(null);
             PreparedStatement ps = c.prepareStatement("UPDATE fenced SET v = v + ? WHERE id = ?")) {
            exec(c, "SET lock.resource = 'drv/prepared'");
            return threeWrites((tok, inc) -> {
                exec(c, "SET lock.fencing_token = " + tok);
                ps.setInt(1, inc);
                ps.setString(2, "prepared");
                ps.executeUpdate();
            });
        }
    }

    static SQLException setlocal() throws SQLException {
        try (Connection c = connect(null)) {
            c.setAutoCommit(false);
            return threeWrites((tok, inc) -> {
                try {
                    exec(c, "SET LOCAL lock.resource = 'drv/setlocal'");
                    exec(c, "SET LOCAL lock.fencing_token = " + tok);
                    exec(c, writeSQL("setlocal", inc));
                    c.commit();
                } catch (SQLException e) {
                    c.rollback();
                    throw e;
                }
            });
        }
    }

    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            if (ch == '"' || ch == '\\') b.append('\\').append(ch);
            else if (ch < 0x20) b.append(String.format("\\u%04x", (int) ch));
            else b.append(ch);
        }
        return b.append('"').toString();
    }

    // The stream cases: every row of STREAM_SQL read with autocommit off and
    // setFetchSize(BATCH), so pgjdbc executes a portal BATCH rows at a time
    // (a server-side cursor). A session with a token carries it as startup
    // options for resource drv/stream. One JSON line per case: the rows read
    // (also those before a failure) and the server's error.
    static final String STREAM_SQL = "SELECT id, v FROM streamed ORDER BY id";
    static final int BATCH = 3;

    static void stream(String options, List<String> rows) throws SQLException {
        try (Connection c = connect(options)) {
            c.setAutoCommit(false);
            try (Statement st = c.createStatement()) {
                st.setFetchSize(BATCH);
                try (ResultSet rs = st.executeQuery(STREAM_SQL)) {
                    while (rs.next()) rows.add(rs.getInt(1) + " " + rs.getString(2));
                }
            }
            c.commit();
        }
    }

    interface StreamCase { void run(List<String> rows) throws SQLException; }

    static String streamOptions(int token) {
        return "-c lock.fencing_token=" + token + " -c lock.resource=drv/stream";
    }

    static void streamMain() {
        Map<String, StreamCase> cases = new LinkedHashMap<>();
        cases.put("fetchsize", rows -> stream(null, rows));
        cases.put("token", rows -> stream(streamOptions(101), rows));
        cases.put("stale", rows -> stream(streamOptions(99), rows));
        for (Map.Entry<String, StreamCase> e : cases.entrySet()) {
            List<String> rows = new ArrayList<>();
            String out;
            try {
                e.getValue().run(rows);
                out = "";
            } catch (SQLException s) {
                String state = s.getSQLState() == null ? "" : s.getSQLState();
                String msg = s.getMessage() == null ? "" : s.getMessage();
                out = ",\"sqlstate\":" + json(state) + ",\"errtype\":" + json(s.getClass().getName()) + ",\"message\":" + json(msg);
            } catch (Exception ex) {
                out = ",\"error\":" + json(ex.toString());
            }
            List<String> quoted = new ArrayList<>();
            for (String r : rows) quoted.add(json(r));
            System.out.println("{\"case\":" + json(e.getKey()) + ",\"rows\":[" + String.join(",", quoted) + "]" + out + "}");
        }
    }

    public static void main(String[] args) {
        if (args.length == 1 && args[0].equals("stream")) {
            streamMain();
            return;
        }
        Map<String, Case> cases = new LinkedHashMap<>();
        cases.put("set", Drivers::set);
        cases.put("comment", Drivers::comment);
        cases.put("sqlcommenter", Drivers::sqlcommenter);
        cases.put("options", Drivers::options);
        cases.put("prepared", Drivers::prepared);
        cases.put("setlocal", Drivers::setlocal);
        for (Map.Entry<String, Case> e : cases.entrySet()) {
            String out;
            try {
                SQLException s = e.getValue().run();
                String state = s.getSQLState() == null ? "" : s.getSQLState();
                String msg = s.getMessage() == null ? "" : s.getMessage();
                out = "\"sqlstate\":" + json(state) + ",\"errtype\":" + json(s.getClass().getName()) + ",\"message\":" + json(msg);
            } catch (Exception ex) {
                out = "\"error\":" + json(ex.toString());
            }
            System.out.println("{\"case\":" + json(e.getKey()) + "," + out + "}");
        }
    }
}
