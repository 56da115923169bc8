package dev.rbl.client;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Just enough JSON for protocol v1: objects become Maps, arrays Lists, integers Long, other numbers
 * Double. Refuses (JobError) integers beyond 64 bits, numbers beyond a double's range and nesting
 * deeper than MAX_DEPTH, so a hostile body cannot overflow the stack or smuggle an infinity; and,
 * as the other runtimes' parsers do, what RFC 8259 does not allow (a bad escape, a raw control
 * character in a string, whitespace other than space, tab, CR and LF).
 */
final class Json {
    static final int MAX_DEPTH = 512;
    private final String text;
    private int pos;
    private int depth;

    private Json(String text) {
        this.text = text;
    }

    static Object parse(String text) {
        Json parser = new Json(text);
        parser.skipSpace();
        Object value = parser.value();
        parser.skipSpace();
        if (parser.pos != text.length()) {
            throw parser.error("unexpected text after the value");
        }
        return value;
    }

    /** A JSON string literal. */
    static String quote(String value) {
        StringBuilder out = new StringBuilder(value.length() + 2).append('"');
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        return out.append('"').toString();
    }

    private Object value() {
        if (pos >= text.length()) {
            throw error("unexpected end of input");
        }
        char c = text.charAt(pos);
        switch (c) {
            case '{': return object();
            case '[': return array();
            case '"': return string();
            case 't': return literal("true", Boolean.TRUE);
            case 'f': return literal("false", Boolean.FALSE);
            case 'n': return literal("null", null);
            default:
                if (c == '-' || (c >= '0' && c <= '9')) {
                    return number();
                }
                throw error("unexpected character '" + c + "'");
        }
    }

    private void deeper() {
        if (++depth > MAX_DEPTH) {
            throw error("nested deeper than " + MAX_DEPTH);
        }
    }

    private Map<String, Object> object() {
        Map<String, Object> map = new LinkedHashMap<>();
        deeper();
        pos++;
        skipSpace();
        if (peek('}')) {
            pos++;
            depth--;
            return map;
        }
        while (true) {
            skipSpace();
            if (!peek('"')) {
                throw error("expected a string key");
            }
            String key = string();
            skipSpace();
            expect(':');
            skipSpace();
            map.put(key, value());
            skipSpace();
            if (peek(',')) {
                pos++;
            } else {
                expect('}');
                depth--;
                return map;
            }
        }
    }

    private List<Object> array() {
        List<Object> list = new ArrayList<>();
        deeper();
        pos++;
        skipSpace();
        if (peek(']')) {
            pos++;
            depth--;
            return list;
        }
        while (true) {
            skipSpace();
            list.add(value());
            skipSpace();
            if (peek(',')) {
                pos++;
            } else {
                expect(']');
                depth--;
                return list;
            }
        }
    }

    private String string() {
        StringBuilder out = new StringBuilder();
        pos++;
        while (pos < text.length()) {
            char c = text.charAt(pos++);
            if (c == '"') {
                return out.toString();
            }
            if (c < 0x20) {
                throw error("a control character in a string");     // JSON has it escaped (RFC 8259 7)
            }
            if (c != '\\') {
                out.append(c);
                continue;
            }
            if (pos >= text.length()) {
                break;
            }
            char e = text.charAt(pos++);
            switch (e) {
                case 'n' -> out.append('\n');
                case 't' -> out.append('\t');
                case 'r' -> out.append('\r');
                case 'b' -> out.append('\b');
                case 'f' -> out.append('\f');
                case 'u' -> {
                    if (pos + 4 > text.length() || !text.substring(pos, pos + 4).matches("[0-9A-Fa-f]{4}")) {
                        throw error("bad \\u escape");
                    }
                    out.append((char) Integer.parseInt(text.substring(pos, pos + 4), 16));
                    pos += 4;
                }
                case '"', '\\', '/' -> out.append(e);
                default -> throw error("bad escape \\" + e);
            }
        }
        throw error("unterminated string");
    }

    private Object number() {
        int start = pos;
        if (peek('-')) {
            pos++;
        }
        boolean integral = true;
        while (pos < text.length()) {
            char c = text.charAt(pos);
            if (c >= '0' && c <= '9') {
                pos++;
            } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
                integral = false;
                pos++;
            } else {
                break;
            }
        }
        String literal = text.substring(start, pos);
        if (!literal.matches("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?")) {
            throw error("bad number " + Job.shown(literal));
        }
        try {
            if (integral) {
                return Long.parseLong(literal);
            }
            double value = Double.parseDouble(literal);
            if (Double.isInfinite(value)) {
                throw error("number " + Job.shown(literal) + " is out of range");
            }
            return value;
        } catch (NumberFormatException e) {
            throw error("integer " + Job.shown(literal) + " does not fit in 64 bits");
        }
    }

    private Object literal(String word, Object value) {
        if (!text.startsWith(word, pos)) {
            throw error("unexpected token");
        }
        pos += word.length();
        return value;
    }

    private boolean peek(char c) {
        return pos < text.length() && text.charAt(pos) == c;
    }

    private void expect(char c) {
        if (!peek(c)) {
            throw error("expected '" + c + "'");
        }
        pos++;
    }

    /** JSON's whitespace only: Character.isWhitespace would also take a vertical tab or U+001C. */
    private void skipSpace() {
        while (pos < text.length() && " \t\n\r".indexOf(text.charAt(pos)) >= 0) {
            pos++;
        }
    }

    private JobError error(String message) {
        return new JobError("the body is not JSON: " + message + " at offset " + pos);
    }
}
