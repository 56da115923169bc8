# rbl's Resilience4j client service (clients/resilience4j), built with Maven, run on a JRE.
# Build args: MAVEN_IMAGE, JAVA_IMAGE.
ARG MAVEN_IMAGE
ARG JAVA_IMAGE
FROM ${MAVEN_IMAGE} AS build
WORKDIR /src
COPY clients/resilience4j /src
RUN mvn -q -B package -DskipTests

FROM ${JAVA_IMAGE}
COPY --from=build /src/target/rbl-client-resilience4j.jar /opt/rbl/client.jar
ENTRYPOINT ["java", "-jar", "/opt/rbl/client.jar"]
