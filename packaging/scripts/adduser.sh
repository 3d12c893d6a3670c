# The system user superfluid, from the sysusers.d file when systemd-sysusers is there
# (it also works without systemd running), else with useradd. Pasted into each
# maintainer script by packaging/Packaging.cmake.
sf_add_user() {
	getent passwd superfluid >/dev/null && return 0
	if command -v systemd-sysusers >/dev/null 2>&1; then
		systemd-sysusers "/usr/lib/sysusers.d/@SF_PKG@.conf" && return 0
	fi
	useradd --system --user-group --home-dir /var/lib/superfluid --no-create-home \
		--shell /usr/sbin/nologin --comment "superfluid daemons" superfluid
}
