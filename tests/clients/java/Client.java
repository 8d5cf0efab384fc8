// pgjdbc client for the proxy's end-to-end tests: prints one line per check, exits 1 on a failed check.
// Usage: java -cp /usr/share/java/postgresql.jar Client.java JDBC_URL USER PASSWORD
import java.sql.*;

public class Client {
    static int failures = 0;

    static void check(String name, boolean ok, String detail) {
        System.out.println((ok ? "OK " : "FAIL ") + name + " " + detail);
        if (!ok) failures++;
    }

    public static void main(String[] args) throws Exception {
        String url = args[0], user = args[1], password = args[2];
        try (Connection c = DriverManager.getConnection(url, user, password)) {
            try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT version()")) {
                rs.next();
                check("version", rs.getString(1).startsWith("PostgreSQL"), rs.getString(1));
            }
            try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT COUNT(*) FROM adult")) {
                rs.next();
                check("count", rs.getLong(1) > 0, Long.toString(rs.getLong(1)));
            }
            // Repeated so that pgjdbc switches to a named server-side statement (prepareThreshold = 5).
            try (PreparedStatement ps = c.prepareStatement("SELECT COUNT(*) FROM adult WHERE age > ?")) {
                for (int i = 0; i < 7; i++) {
                    ps.setInt(1, 30 + i);
                    try (ResultSet rs = ps.executeQuery()) {
                        rs.next();
                        check("param" + i, rs.getLong(1) >= 0, Long.toString(rs.getLong(1)));
                    }
                }
            }
            try (Statement st = c.createStatement();
                 ResultSet rs = st.executeQuery("SELECT sex, COUNT(*) FROM adult GROUP BY sex ORDER BY sex")) {
                int n = 0;
                while (rs.next()) n++;
                check("groupby", n == 2, Integer.toString(n));
            }
            try (Statement st = c.createStatement()) {
                st.executeQuery("SELECT * FROM adult");
                check("refused", false, "no error");
            } catch (SQLException e) {
                check("refused", "42501".equals(e.getSQLState()), e.getSQLState());
            }
            try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT COUNT(*) FROM adult")) {
                rs.next();
                check("after_refusal", rs.getLong(1) > 0, Long.toString(rs.getLong(1)));
            }
            DatabaseMetaData md = c.getMetaData();
            try (ResultSet rs = md.getTables(null, "public", "%", new String[]{"TABLE"})) {
                boolean found = false;
                while (rs.next()) found |= "adult".equals(rs.getString("TABLE_NAME"));
                check("metadata_tables", found, "");
            }
            try (ResultSet rs = md.getColumns(null, "public", "adult", "%")) {
                int n = 0;
                while (rs.next()) n++;
                check("metadata_columns", n > 0, Integer.toString(n));
            }
            c.setAutoCommit(false);
            try (Statement st = c.createStatement()) {
                st.setFetchSize(1);   // a portal with a row limit: PortalSuspended
                try (ResultSet rs = st.executeQuery("SELECT sex, COUNT(*) FROM adult GROUP BY sex")) {
                    int n = 0;
                    while (rs.next()) n++;
                    check("fetchsize", n == 2, Integer.toString(n));
                }
                // Pages of 10 rows over 74 groups: every row, and the same rows again (charged once, replayed).
                st.setFetchSize(10);
                StringBuilder first = new StringBuilder(), again = new StringBuilder();
                int n = 0;
                try (ResultSet rs = st.executeQuery("SELECT age, COUNT(*) FROM adult WHERE sex = 0 GROUP BY age ORDER BY age")) {
                    while (rs.next()) { n++; first.append(rs.getInt(1)).append(':').append(rs.getLong(2)).append(','); }
                }
                try (ResultSet rs = st.executeQuery("SELECT age, COUNT(*) FROM adult WHERE sex = 0 GROUP BY age ORDER BY age")) {
                    while (rs.next()) again.append(rs.getInt(1)).append(':').append(rs.getLong(2)).append(',');
                }
                check("fetchsize_pages", n == 74, Integer.toString(n));
                check("fetchsize_replayed", first.toString().equals(again.toString()), "");
            }
            c.commit();
        }
        System.out.println(failures == 0 ? "ALL OK" : failures + " FAILED");
        System.exit(failures == 0 ? 0 : 1);
    }
}
