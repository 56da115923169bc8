package dev.rbl.client;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * rbl's Resilience4j client service: rbl client protocol v1 (DESIGN 5.2) on the JDK's HTTP server.
 * Each POST /run is one virtual user on its own thread. Usage: java -jar rbl-client-resilience4j.jar
 * [--listen HOST:PORT] (default 127.0.0.1:0); prints `listening PORT` once bound.
 */
public final class Main {
    private Main() {
    }

    public static void main(String[] args) throws IOException {
        String listen = "127.0.0.1:0";
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--listen") && i + 1 < args.length) {
                listen = args[++i];
            } else {
                System.err.println("usage: java -jar rbl-client-resilience4j.jar [--listen HOST:PORT]");
                System.exit(2);
            }
        }
        int colon = listen.lastIndexOf(':');
        String host = colon > 0 ? listen.substring(0, colon) : "127.0.0.1";
        int port = Integer.parseInt(listen.substring(colon + 1));

        ClientService service = new ClientService(resilience4jVersion());
        HttpServer server = HttpServer.create(new InetSocketAddress(host, port), 1024);
        ExecutorService threads = Executors.newCachedThreadPool(runnable -> {
            Thread thread = new Thread(runnable, "rbl-vu");
            thread.setDaemon(true);
            return thread;
        });
        server.setExecutor(threads);
        server.createContext("/health", exchange -> {
            drain(exchange);
            reply(exchange, exchange.getRequestMethod().equals("GET") ? 200 : 405,
                    exchange.getRequestMethod().equals("GET") ? service.health() : "{\"error\":\"use GET\"}");
        });
        server.createContext("/run", exchange -> {
            String body = new String(drain(exchange), StandardCharsets.UTF_8);
            if (!exchange.getRequestMethod().equals("POST")) {
                reply(exchange, 405, "{\"error\":\"use POST\"}");
                return;
            }
            try {
                reply(exchange, 200, service.run(Job.parse(Json.parse(body))));
            } catch (JobError e) {
                reply(exchange, 400, "{\"error\":" + Json.quote(e.getMessage()) + "}");
            } catch (RuntimeException e) {
                reply(exchange, 500, "{\"error\":" + Json.quote(e.toString()) + "}");
            }
        });
        server.createContext("/", exchange -> {
            drain(exchange);
            reply(exchange, 404, "{\"error\":" + Json.quote("no route " + exchange.getRequestURI().getPath()) + "}");
        });
        server.start();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> server.stop(0)));
        String self = host.equals("0.0.0.0") ? "127.0.0.1" : host;
        Target.warmUp(URI.create("http://" + self + ":" + server.getAddress().getPort() + "/health"));
        System.out.println("listening " + server.getAddress().getPort());
        System.out.flush();
    }

    static String resilience4jVersion() {
        Properties properties = new Properties();
        try (InputStream in = Main.class.getResourceAsStream("/rbl-client.properties")) {
            properties.load(in);
        } catch (IOException | NullPointerException e) {
            return "unknown";
        }
        return properties.getProperty("resilience4j.version", "unknown");
    }

    private static byte[] drain(HttpExchange exchange) throws IOException {
        try (InputStream in = exchange.getRequestBody()) {
            return in.readAllBytes();
        }
    }

    private static void reply(HttpExchange exchange, int status, String json) throws IOException {
        byte[] data = json.getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().set("content-type", "application/json");
        exchange.sendResponseHeaders(status, data.length);
        try (OutputStream out = exchange.getResponseBody()) {
            out.write(data);
        }
    }
}
